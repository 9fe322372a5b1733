//! `zapraid replace`: puts a new drive in a failed drive's place in a running array and
//! starts rebuilding onto it. The checks of the new drive and the swap are the server's
//! (`zapraid_server::ops::replace`); this names the drive (by path or index), makes the new
//! drive's path absolute (the server may run elsewhere), and says what happened.
//! `zapraid rebuild-rate` changes the rebuild rate limit of a running array.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use zapraid_server::control;

use crate::array::find_drive;
use crate::size::{format_rate, parse_rate};
use crate::text::answer_text;

#[derive(Args)]
pub struct ReplaceArgs {
    /// The array's name.
    name: String,
    /// The failed drive: its index in the array, or its path.
    drive: String,
    /// The new drive (/dev/ngXnY or an emulated drive file): empty, of the array's geometry.
    new_drive: PathBuf,
    /// Take the new drive even if it holds data (another array's superblock, written
    /// zones): it is erased.
    #[arg(long)]
    force: bool,
    /// Limit the rebuild to writing this much per second to the new drive (200M, 1G, or
    /// unlimited), leaving the rest of the drives' bandwidth to the array's users; the
    /// array's limit from then on (`zapraid rebuild-rate` changes it). Not given: the
    /// array's limit stays (unlimited unless `start --rebuild-rate` or `rebuild-rate`
    /// set one).
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    rebuild_rate: Option<u64>,
}

#[derive(Args)]
pub struct RebuildRateArgs {
    /// The array's name.
    name: String,
    /// At most this much written per second to the drive being rebuilt: a size per
    /// second (100M, 200MiB/s, 1G) or unlimited (also 0).
    #[arg(value_parser = parse_rate)]
    rate: u64,
}

/// `zapraid rebuild-rate NAME RATE`: the running rebuild and later ones write at most
/// RATE per second to the new drive, from now until the array stops.
pub fn run_rebuild_rate(args: RebuildRateArgs) -> Result<()> {
    let rate = if args.rate == 0 { "unlimited".to_string() } else { args.rate.to_string() };
    let answer = control::ask(&args.name, &format!("rebuild-rate {rate}"))?;
    if let Some(e) = answer.get("error") {
        bail!("array \"{}\": cannot set the rebuild rate: {}", args.name, answer_text(e));
    }
    let limit = answer["rebuild_rate_bytes_per_s"].as_u64();
    println!("array \"{}\": rebuild rate limit {}", args.name, format_rate(limit));
    Ok(())
}

pub fn run_replace(args: ReplaceArgs) -> Result<()> {
    let status = control::ask(&args.name, "status")?;
    if let Some(e) = status.get("error") {
        bail!("array \"{}\": {}", args.name, answer_text(e));
    }
    let drives = status["drives"].as_array().cloned().unwrap_or_default();
    let index = match args.drive.parse::<usize>() {
        Ok(i) => i,
        Err(_) => find_drive(&drives, &args.drive)
            .with_context(|| format!("array \"{}\" has no drive {}", args.name, args.drive))?,
    };
    let new_drive =
        std::fs::canonicalize(&args.new_drive).with_context(|| format!("new drive {}", args.new_drive.display()))?;
    let force = if args.force { "force" } else { "check" };
    let rate = match args.rebuild_rate {
        Some(0) => " rate=unlimited".to_string(),
        Some(rate) => format!(" rate={rate}"),
        None => String::new(),
    };
    let answer = control::ask(&args.name, &format!("replace {index} {force}{rate} {}", new_drive.display()))?;
    if let Some(e) = answer.get("error") {
        bail!("array \"{}\": cannot replace drive {index}: {}", args.name, answer_text(e));
    }
    let limit = match args.rebuild_rate {
        Some(rate) => format!(", at most {}", format_rate(Some(rate))),
        None => String::new(),
    };
    println!(
        "array \"{}\": drive {index} replaced by {}; rebuilding onto it{limit} (zapraid status {} shows the progress)",
        args.name,
        args.new_drive.display(),
        args.name
    );
    Ok(())
}
