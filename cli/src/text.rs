//! What several commands show alike: an error in a control socket's answer, as a
//! sentence (`answer_text`), and a progress bar on a terminal (`bar`).

use std::io::IsTerminal;

/// An error in a control socket's answer, as text (not as a JSON string in quotes).
pub(crate) fn answer_text(error: &serde_json::Value) -> String {
    error.as_str().map_or_else(|| error.to_string(), str::to_string)
}

/// A progress bar on a terminal, nothing otherwise.
pub(crate) fn bar(total: u64, what: &str) -> indicatif::ProgressBar {
    if std::io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len}")
                .expect("template")
                .progress_chars("=> "),
        );
        bar.set_message(what.to_string());
        bar
    } else {
        indicatif::ProgressBar::hidden()
    }
}
