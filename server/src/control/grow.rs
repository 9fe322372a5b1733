//! `grow force|check PATHS` on the control socket (`zapraid grow`): PATHS is a JSON array
//! of the new drives' absolute paths (paths may hold spaces; one line carries them all, as
//! one grow adds them all under one new placement). The answer names the drives the array
//! has now, or the error.

use std::path::PathBuf;
use std::sync::Mutex;

use super::error_json;
use crate::error::Error;
use crate::ops::grow::grow;
use crate::ops::spare_pool::Spares;
use crate::ops::Identity;
use crate::run::message::EngineSender;

pub(super) fn control(
    identity: &Mutex<Identity>,
    engine: &EngineSender,
    spares: &Spares,
    line: &str,
) -> serde_json::Value {
    let mut words = line.splitn(3, ' ');
    let (Some(_), Some(force), Some(paths)) = (words.next(), words.next(), words.next()) else {
        return error_json("grow needs force or check, and the new drives' paths as a JSON array");
    };
    if force != "force" && force != "check" {
        return error_json(&format!("grow takes force or check, not \"{force}\""));
    }
    let paths: Vec<PathBuf> = match serde_json::from_str::<Vec<String>>(paths) {
        Ok(paths) if !paths.is_empty() => paths.into_iter().map(PathBuf::from).collect(),
        Ok(_) => return error_json("grow needs at least one new drive"),
        Err(e) => return error_json(&format!("grow's drives are a JSON array of paths: {e}")),
    };
    if let Some(spare) = paths.iter().find(|p| spares.holds(p)) {
        return error_json(&format!(
            "{} is a spare of this array (zapraid remove-spare frees it first)",
            spare.display()
        ));
    }
    match grow(identity, engine, &paths, force == "force") {
        Ok(drives) => serde_json::json!({
            "drives": drives,
            "added": paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        }),
        Err(Error::EngineGone) => error_json("the engine has stopped"),
        Err(e) => error_json(&e.to_string()),
    }
}
