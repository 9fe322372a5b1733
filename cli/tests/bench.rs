//! `zapraid bench` as a user runs it: an experiment selection, its figures and report
//! (`--plot`), and bad input. Small runs only (`--quick --requests`): seconds.

mod common;

use common::{text, zapraid_in};

/// Requests per cell: enough to run every path, few enough for a debug build.
const FEW_REQUESTS: &str = "100";

#[test]
fn a_selection_runs_in_order_and_plots_its_figures_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("out");
    let plot_arg = plot.to_str().unwrap();
    let out =
        zapraid_in(dir.path(), &["bench", "exp6", "exp4", "--quick", "--requests", FEW_REQUESTS, "--plot", plot_arg]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    // In the order asked.
    let (exp6, exp4) = (all.find("Exp#6 (a)").unwrap(), all.find("Exp#4: RAID schemes").unwrap());
    assert!(exp6 < exp4, "{all}");
    for level in ["RAID-0 (4)", "RAID-01 (2+2)", "RAID-4 (3+1)", "RAID-5 (3+1)", "RAID-6 (2+2)"] {
        assert!(all.contains(level), "{level}: {all}");
    }
    let svg = std::fs::read_to_string(plot.join("exp4.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("ZoneWrite-Only"), "{svg}");
    let report = std::fs::read_to_string(plot.join("report.md")).unwrap();
    assert!(report.contains("![Exp#4: RAID schemes](exp4.svg)"), "{report}");
    assert!(report.contains("![Exp#6: scalability](exp6.svg)"), "{report}");
    assert!(report.find("## Exp#6").unwrap() < report.find("## Exp#4").unwrap(), "{report}");
    assert!(report.contains("`zapraid bench exp4 --quick`") && report.contains("RAID-6 (2+2)"), "{report}");
    // Only what was selected: no other experiment's figure.
    let mut files: Vec<String> =
        std::fs::read_dir(&plot).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    assert_eq!(files, ["exp4.svg", "exp6.svg", "report.md"]);
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = zapraid_in(dir.path(), &["bench", "exp99"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("invalid value 'exp99'"), "{}", text(&out));
    // A plot directory that is a file: said, with its name, no panic.
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let out = zapraid_in(dir.path(), &["bench", "exp4", "--plot", file.to_str().unwrap()]);
    let all = text(&out);
    assert!(!out.status.success() && all.contains("plot directory") && all.contains("a-file"), "{all}");
    assert!(!all.contains("panicked"), "{all}");
    let out = zapraid_in(dir.path(), &["bench", "exp4", "--requests", "0"]);
    assert!(!out.status.success() && text(&out).contains("--requests"), "{}", text(&out));
}

/// An option no selected experiment uses is refused before anything runs, naming the
/// experiments that take it, instead of printing figures of another run than asked for.
#[test]
fn an_option_no_selected_experiment_uses_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str, &str); 3] = [
        (&["bench", "exp8", "--writes-only"], "--writes-only is not used by exp8", "only paper"),
        (&["bench", "exp9", "--requests", "10"], "--requests is not used by exp9", "exp4, exp6"),
        (&["bench", "recovery", "--trace", "t.csv"], "--trace is not used by recovery", "only exp10"),
    ];
    for (args, said, users) in cases {
        let out = zapraid_in(dir.path(), args);
        let all = text(&out);
        assert!(!out.status.success() && all.contains(said) && all.contains(users), "{args:?}: {all}");
        assert!(!all.contains("Exp#"), "{args:?}: ran before refusing: {all}");
    }
    // `paper` runs Exp#7 unless --writes-only: then --requests has no user.
    let out = zapraid_in(dir.path(), &["bench", "paper", "--writes-only", "--requests", "10"]);
    assert!(!out.status.success() && text(&out).contains("--requests is not used by paper"), "{}", text(&out));
}

#[test]
fn help_lists_every_experiment() {
    let dir = tempfile::tempdir().unwrap();
    let out = zapraid_in(dir.path(), &["bench", "--help"]);
    let help = text(&out);
    for name in ["paper", "exp4", "exp5", "exp6", "hybrid", "exp8", "exp9", "exp10", "cpu", "all", "--plot"] {
        assert!(help.contains(name), "{name}: {help}");
    }
}
