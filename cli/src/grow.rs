//! `zapraid grow`: new drives added to a running declustered array. The checks, the record
//! of the grown shape and the engine's new placement are the server's
//! (`zapraid_server::ops::grow`, `run::thread::grow`); this makes the paths absolute (the
//! server may run elsewhere), asks, and says what happened and what follows.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use zapraid_server::control;

use crate::text::answer_text;

#[derive(Args)]
pub struct GrowArgs {
    /// The array's name.
    name: String,
    /// The new drives (/dev/ngXnY or emulated drive files): not members, of the array's
    /// geometry, empty. All of them join at once, under one new placement.
    #[arg(required = true)]
    drives: Vec<PathBuf>,
    /// Take drives even if they hold data (another array's superblock or spare record,
    /// written zones): they are erased.
    #[arg(long)]
    force: bool,
}

pub fn run_grow(args: GrowArgs) -> Result<()> {
    let mut paths = Vec::with_capacity(args.drives.len());
    for drive in &args.drives {
        let path = std::fs::canonicalize(drive).with_context(|| format!("new drive {}", drive.display()))?;
        paths.push(path.display().to_string());
    }
    let force = if args.force { "force" } else { "check" };
    let answer = control::ask(&args.name, &format!("grow {force} {}", serde_json::to_string(&paths)?))?;
    if let Some(e) = answer.get("error") {
        bail!("array \"{}\": cannot grow: {}", args.name, answer_text(e));
    }
    let drives = answer["drives"].as_u64().unwrap_or(0);
    println!(
        "array \"{}\": grown to {drives} drives ({} added). New segments use the new drives at once; garbage \
         collection moves the other segments onto them over time, at the rebuild rate if one is set (zapraid status \
         {} shows the zone indexes left). The array's capacity is unchanged: growing it is not built yet.",
        args.name,
        args.drives.len(),
        args.name
    );
    Ok(())
}
