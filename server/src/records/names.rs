//! Array names: which names an array may have, and which one a start uses. A name is
//! kept in the superblock's name field and becomes the file name of the array's control
//! socket (`NAME.sock`) and daemon log (`NAME.log`) in the run directory, so it must fit
//! the one and stay a plain file name in the other: not empty, at most
//! `MAX_NAME_BYTES`, no `/`, no leading `.` (no `..`, no hidden files), no whitespace or
//! control characters.

use crate::error::{Error, Result};

/// Bytes of the superblock's name field (`ArraySuperblock::name`).
pub const MAX_NAME_BYTES: usize = 32;

/// The name an array gets when its superblock holds none (arrays formatted before names
/// were checked could have an empty one).
pub const DEFAULT_NAME: &str = "zapraid";

/// What is wrong with `name` as an array name, if anything.
fn problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("is empty".into());
    }
    if name.len() > MAX_NAME_BYTES {
        return Some(format!("is {} bytes long; the superblock holds at most {MAX_NAME_BYTES}", name.len()));
    }
    if name.contains('/') {
        return Some("contains \"/\"".into());
    }
    if name.starts_with('.') {
        return Some("starts with \".\"".into());
    }
    if name.chars().any(char::is_whitespace) {
        return Some("contains whitespace".into());
    }
    if name.chars().any(char::is_control) {
        return Some("contains a control character".into());
    }
    None
}

/// Refuses a name an array cannot have (at format, or given to start with --name).
pub fn check_name(name: &str) -> Result<()> {
    match problem(name) {
        None => Ok(()),
        Some(problem) => Err(Error::Name {
            name: name.to_string(),
            problem: format!(
                "{problem}: it names the array's control socket and log in the run directory (use e.g. \
                 letters, digits, '-' and '_', at most {MAX_NAME_BYTES} bytes)"
            ),
        }),
    }
}

/// The name a start runs the array under: the one given (--name), else the one in its
/// superblock (`DEFAULT_NAME` if that is empty). A superblock name that cannot name the
/// array's files is refused with a word on how to start it anyway.
pub fn start_name(given: Option<&str>, superblock_name: &str) -> Result<String> {
    if let Some(name) = given {
        check_name(name)?;
        return Ok(name.to_string());
    }
    if superblock_name.is_empty() {
        return Ok(DEFAULT_NAME.to_string());
    }
    match problem(superblock_name) {
        None => Ok(superblock_name.to_string()),
        Some(problem) => Err(Error::Name {
            name: superblock_name.to_string(),
            problem: format!(
                "(the name it was formatted with) {problem}, and cannot name its control socket and log: \
                 start it with --name and another name"
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_the_superblock_name_field() {
        let sb = <zapraid_engine::format::ArraySuperblock as zerocopy::FromZeros>::new_zeroed();
        assert_eq!(std::mem::size_of_val(&sb.name), MAX_NAME_BYTES);
    }

    #[test]
    fn names_that_cannot_be_file_names_are_refused() {
        for name in ["tank", "array-1", "a.b", "raid_5", &"x".repeat(MAX_NAME_BYTES), "ünïcode"] {
            assert!(check_name(name).is_ok(), "{name} refused");
        }
        for (name, said) in [
            ("", "array name \"\" is empty:"),
            ("a/b", "array name \"a/b\" contains \"/\":"),
            ("../x", "array name \"../x\" contains \"/\":"),
            ("..", "array name \"..\" starts with \".\":"),
            (".hidden", "starts with \".\":"),
            ("a b", "contains whitespace"),
            ("a\tb", "array name \"a\\tb\" contains whitespace"),
            ("a\u{7}b", "array name \"a\\u{7}b\" contains a control character"),
        ] {
            let e = check_name(name).expect_err(name).to_string();
            assert!(e.contains(said), "{name:?}: {e}");
            assert!(e.contains("control socket and log"), "{name:?}: {e}");
        }
        let long = "y".repeat(MAX_NAME_BYTES + 1);
        let e = check_name(&long).unwrap_err().to_string();
        assert!(e.contains("is 33 bytes long; the superblock holds at most 32"), "{e}");
    }

    #[test]
    fn a_start_takes_the_given_name_else_the_superblock_one() {
        assert_eq!(start_name(Some("given"), "tank").unwrap(), "given");
        assert_eq!(start_name(None, "tank").unwrap(), "tank");
        assert_eq!(start_name(None, "").unwrap(), DEFAULT_NAME);
        assert!(start_name(Some(""), "tank").is_err());
        assert!(start_name(Some("a/b"), "tank").is_err());
        let e = start_name(None, "x/y").unwrap_err().to_string();
        assert!(e.contains("the name it was formatted with") && e.contains("--name"), "{e}");
        // A bad superblock name does not matter when another is given.
        assert_eq!(start_name(Some("ok"), "x/y").unwrap(), "ok");
    }
}
