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
    for name in
        ["paper", "exp4", "exp5", "exp6", "hybrid", "exp8", "exp9", "exp10", "cpu", "declustered", "all", "--plot"]
    {
        assert!(help.contains(name), "{name}: {help}");
    }
}

/// `bench cpu` runs the real server path (engine thread, drive driver, frontend threads)
/// and accounts for it: the writes sent are the writes the engine counted, every thread of
/// the process has a role and a CPU time (an engine thread per shard). Structure only: no
/// timing is checked.
#[test]
fn bench_cpu_runs_the_server_path_and_accounts_for_every_thread() {
    let dir = tempfile::tempdir().unwrap();
    let json_path = dir.path().join("cpu.json");
    let args = ["bench", "cpu", "--requests", "300", "--shards", "1,2", "--json", json_path.to_str().unwrap()];
    let out = zapraid_in(dir.path(), &args);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("Engine only") && all.contains("The real server path"), "{all}");
    assert!(
        all.contains("frontend threads stand in for the ublk queues") || all.contains("ublk is available"),
        "{all}"
    );
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(json["engine_only"].as_array().unwrap().len(), 2, "{json}");
    let server = &json["server_path"];
    let frontends = server["frontends"].as_u64().unwrap();
    assert!(frontends >= 1, "{server}");
    let runs = server["runs"].as_array().unwrap();
    // RAID-5 and RAID-6, each with 1 and 2 shards, with the engines on the frontends and
    // on threads of their own.
    assert_eq!(runs.len(), 8, "{server}");
    let on = |run: &serde_json::Value| run["engines_on"].as_str().unwrap().to_string();
    assert_eq!(runs.iter().filter(|r| on(r) == "frontends").count(), 4, "{server}");
    assert_eq!(runs.iter().filter(|r| on(r) == "threads").count(), 4, "{server}");
    for run in runs {
        let figure = &run["figure"];
        let shards = run["shards"].as_u64().unwrap();
        assert_eq!(figure["requests"], 300, "{run}");
        assert_eq!(figure["engine_counted_writes"], 300, "{run}");
        if shards == 1 {
            assert_eq!(figure["scaling_vs_1_shard"], 1.0, "{run}");
        } else {
            assert!(figure["scaling_vs_1_shard"].as_f64().unwrap() > 0.0, "{run}");
        }
        let cpu_us = figure["cpu_us_per_request"].as_f64().unwrap();
        assert!(cpu_us > 0.0, "{run}");
        let latency = &figure["latency_us"];
        let (p50, p99, p99_99) =
            (latency["p50"].as_f64().unwrap(), latency["p99"].as_f64().unwrap(), latency["p99_99"].as_f64().unwrap());
        assert!(0.0 < p50 && p50 <= p99 && p99 <= p99_99, "{run}");
        // Every thread of the process, each with its role: the engine thread (and its
        // rebuild workers), one per frontend, the main thread; none unknown; their CPU
        // times sum to the figure.
        let threads = figure["threads"].as_array().unwrap();
        let mut roles: Vec<&str> = threads.iter().map(|t| t["role"].as_str().unwrap()).collect();
        roles.sort_unstable();
        let mut expected = vec!["main (starts the run, waits)".to_string()];
        match shards {
            1 => {
                expected.push("engine (and its drives)".to_string());
                // The engine thread's rebuild workers, idle here (no rebuild runs).
                let workers = zapraid_server::run::thread::rebuild_workers::default_threads();
                expected.extend((0..workers).map(|i| format!("rebuild worker {i}")));
            }
            _ => expected.extend((0..shards).map(|i| format!("engine shard {i} (and its drive parts)"))),
        }
        expected.extend((0..frontends).map(|i| format!("frontend {i}")));
        expected.sort_unstable();
        assert_eq!(roles, expected, "{run}");
        // The engines' work is on their threads, or on the frontends that run them.
        let runs_engine = |role: &str| match on(run).as_str() {
            "threads" => role.starts_with("engine"),
            _ => role.strip_prefix("frontend ").is_some_and(|i| i.parse::<u64>().unwrap() < shards),
        };
        let engines = threads.iter().filter(|t| runs_engine(t["role"].as_str().unwrap()));
        let running_engines = if on(run) == "threads" { shards } else { shards.min(frontends) };
        assert_eq!(engines.clone().count() as u64, running_engines, "{run}");
        assert!(engines.clone().all(|t| t["cpu_ms"].as_f64().unwrap() > 0.0), "{run}");
        let sum_us: f64 = threads.iter().map(|t| t["cpu_us_per_request"].as_f64().unwrap()).sum();
        assert!((sum_us - cpu_us).abs() <= 1e-6 * cpu_us.max(1.0), "{sum_us} vs {cpu_us}: {run}");
    }
}
