//! `zapraid replace`: puts a new drive in a failed drive's place in a running array and
//! starts rebuilding onto it. The checks of the new drive and the swap are the server's
//! (`zapraid_server::replace`); this names the drive (by path or index), makes the new
//! drive's path absolute (the server may run elsewhere), and says what happened.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use zapraid_server::control;

use crate::array::{answer_text, find_drive};

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
    let answer = control::ask(&args.name, &format!("replace {index} {force} {}", new_drive.display()))?;
    if let Some(e) = answer.get("error") {
        bail!("array \"{}\": cannot replace drive {index}: {}", args.name, answer_text(e));
    }
    println!(
        "array \"{}\": drive {index} replaced by {}; rebuilding onto it (zapraid status {} shows the progress)",
        args.name,
        args.new_drive.display(),
        args.name
    );
    Ok(())
}
