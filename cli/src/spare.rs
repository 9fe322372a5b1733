//! `zapraid add-spare | remove-spare`: hot spares of a running array. The checks, the
//! spare record and the rebuild onto a spare are the server's (`zapraid_server::ops::spare_pool`,
//! `records::spare`); this makes the drive's path absolute (the server may run elsewhere)
//! and says what happened. Also what `status` and a background `start` say of spares.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::Value;
use zapraid_server::control;

use crate::text::answer_text;

#[derive(Args)]
pub struct AddSpareArgs {
    /// The array's name.
    name: String,
    /// The drive (/dev/ngXnY or an emulated drive file): not a member, of the array's
    /// geometry, empty.
    drive: PathBuf,
    /// Take the drive even if it holds data (another array's superblock or spare record,
    /// written zones): it is erased.
    #[arg(long)]
    force: bool,
}

#[derive(Args)]
pub struct RemoveSpareArgs {
    /// The array's name.
    name: String,
    /// The spare: its record is erased and the drive let go.
    drive: PathBuf,
}

pub fn run_add_spare(args: AddSpareArgs) -> Result<()> {
    let drive = std::fs::canonicalize(&args.drive).with_context(|| format!("spare {}", args.drive.display()))?;
    let force = if args.force { "force" } else { "check" };
    let answer = control::ask(&args.name, &format!("add-spare {force} {}", drive.display()))?;
    if let Some(e) = answer.get("error") {
        bail!("array \"{}\": cannot add spare {}: {}", args.name, args.drive.display(), answer_text(e));
    }
    match answer["rebuilding_drive"].as_u64() {
        Some(failed) => println!(
            "array \"{}\": {} added as a spare; rebuilding drive {failed} onto it (zapraid status {} shows the \
             progress)",
            args.name,
            args.drive.display(),
            args.name
        ),
        None => println!(
            "array \"{}\": {} added as a spare; it is rebuilt onto by itself when a drive fails (give it to zapraid \
             start among the drives)",
            args.name,
            args.drive.display()
        ),
    }
    Ok(())
}

pub fn run_remove_spare(args: RemoveSpareArgs) -> Result<()> {
    let drive = std::fs::canonicalize(&args.drive).with_context(|| format!("spare {}", args.drive.display()))?;
    let answer = control::ask(&args.name, &format!("remove-spare {}", drive.display()))?;
    if let Some(e) = answer.get("error") {
        bail!("array \"{}\": cannot remove spare {}: {}", args.name, args.drive.display(), answer_text(e));
    }
    println!("array \"{}\": {} is no longer a spare (its spare record is erased)", args.name, args.drive.display());
    Ok(())
}

/// The spares of a status document in one line ("spares: a ready, b unusable (why)"), or
/// `None` without any (or from a server before spares).
pub fn spares_line(status: &Value) -> Option<String> {
    let spares: Vec<String> = status["spares"]
        .as_array()?
        .iter()
        .map(|s| {
            let path = s["path"].as_str().unwrap_or("?");
            let state = s["state"].as_str().unwrap_or("?");
            match s["reason"].as_str() {
                Some(why) => format!("{path} {state} ({why})"),
                None => format!("{path} {state}"),
            }
        })
        .collect();
    (!spares.is_empty()).then(|| format!("spares: {}", spares.join(", ")))
}

/// "rebuilding drive 1 onto spare /path" when the running rebuild writes onto a spare.
pub fn spare_rebuild_line(status: &Value) -> Option<String> {
    let r = &status["rebuild"];
    Some(format!("rebuilding drive {} onto spare {}", r["drive"].as_u64()?, r["spare"].as_str()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spares_and_a_rebuild_onto_one_are_said_in_words() {
        let s = serde_json::json!({
            "spares": [
                { "path": "s0", "state": "ready", "reason": null },
                { "path": "s1", "state": "unusable", "reason": "gone" },
            ],
            "rebuild": { "drive": 1, "spare": "/x/s2" },
        });
        assert_eq!(spares_line(&s).as_deref(), Some("spares: s0 ready, s1 unusable (gone)"));
        assert_eq!(spare_rebuild_line(&s).as_deref(), Some("rebuilding drive 1 onto spare /x/s2"));
        let none = serde_json::json!({ "spares": [], "rebuild": { "drive": 1 } });
        assert_eq!((spares_line(&none), spare_rebuild_line(&none)), (None, None));
    }
}
