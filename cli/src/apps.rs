//! `zapraid apps-report`: the tables (and with `--plot DIR` the figures) of the paper's
//! real-application experiments, Exp#11 (file writes) and Exp#12 (a relational database),
//! from the results file `make apps` collects from the QEMU guest (femu/apps.sh). This
//! module owns that file's format, one measurement a line:
//!
//! ```text
//! exp11 zapraid 4k 13.11      (experiment, scheme, open-segment setting, MiB/s or TPS)
//! ```
//!
//! and the paper's findings set beside ours. It measures nothing itself: the guest's
//! scenario (femu/scenarios/apps.sh) does.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::plot::{write_svg, BarSeries, Bars, Figure, Panel};

#[derive(Args)]
pub struct AppsReportArgs {
    /// The results file of `make apps` (target/femu/apps/results.txt).
    results: PathBuf,
    /// Also draw a figure per experiment (SVG) into DIR, made if missing.
    #[arg(long, value_name = "DIR")]
    plot: Option<PathBuf>,
}

/// The schemes: the name in the results file (`format --mode`) and the paper's name.
const SCHEMES: [(&str, &str); 3] =
    [("zapraid", "ZapRAID"), ("zone-write", "ZoneWrite-Only"), ("zone-append", "ZoneAppend-Only")];

/// The paper's four open-segment settings: the name in the results file and for people.
const SETTINGS: [(&str, &str); 4] =
    [("4k", "1 x 4 KiB"), ("16k", "1 x 16 KiB"), ("2-2", "(2,2) 8/16 KiB"), ("1-3", "(1,3) 8/16 KiB")];

/// What the paper found for a setting: ZapRAID's gain over ZoneWrite-Only and over
/// ZoneAppend-Only, as a number where it gives one, "similar" where it says so.
#[derive(Clone, Copy)]
enum Finding {
    Gain(f64),
    Similar,
    NotStated,
}

impl Finding {
    fn text(self) -> String {
        match self {
            Finding::Gain(g) => format!("{:+.1}%", g * 100.0),
            Finding::Similar => "similar".into(),
            Finding::NotStated => "-".into(),
        }
    }
}

struct Experiment {
    key: &'static str,
    title: &'static str,
    unit: &'static str,
    /// Per setting: the paper's finding over ZoneWrite-Only, and over ZoneAppend-Only.
    paper: [(Finding, Finding); 4],
    /// What ran in the guest (the scaled-down workload).
    workload: &'static str,
}

const EXPERIMENTS: [Experiment; 2] = [
    Experiment {
        key: "exp11",
        title: "Exp#11: file writes (sysbench fileio on ext4)",
        unit: "MiB/s",
        paper: [
            (Finding::Gain(0.769), Finding::Similar),
            (Finding::Gain(0.153), Finding::Similar),
            (Finding::Similar, Finding::Similar),
            (Finding::NotStated, Finding::Gain(0.163)),
        ],
        workload: "sysbench 1.0.20 fileio: 64 KiB writes at random offsets of prepared files, one thread, \
                   async I/O, O_DIRECT, fsync at the end",
    },
    Experiment {
        key: "exp12",
        title: "Exp#12: relational database (PostgreSQL 15, TPC-C-like)",
        unit: "TPS",
        paper: [
            (Finding::Gain(0.160), Finding::Similar),
            (Finding::Similar, Finding::Similar),
            (Finding::Similar, Finding::Similar),
            (Finding::Similar, Finding::Similar),
        ],
        workload: "PostgreSQL 15 on ext4, the five TPC-C transactions at the standard mix (femu/apps/tpcc, \
                   pgbench as the driver; not an audited TPC-C; the paper: MySQL 8.0 under tpcc-mysql)",
    },
];

/// Measurements by experiment, setting and scheme (indexes into the tables above).
#[derive(Debug, Default, PartialEq)]
struct Results {
    values: [[[Option<f64>; 3]; 4]; 2],
}

fn index_of(names: &[(&str, &str)], key: &str) -> Option<usize> {
    names.iter().position(|(k, _)| *k == key)
}

/// Parses a results file; `what` names it in errors.
fn parse(text: &str, what: &str) -> Result<Results> {
    let mut results = Results::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let at = || format!("{what} line {}", n + 1);
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [exp, scheme, setting, value] = fields[..] else {
            bail!("{}: expected `experiment scheme setting value`, found `{line}`", at());
        };
        let Some(e) = EXPERIMENTS.iter().position(|x| x.key == exp) else {
            bail!("{}: unknown experiment `{exp}` (exp11 or exp12)", at());
        };
        let Some(s) = index_of(&SCHEMES, scheme) else {
            bail!("{}: unknown scheme `{scheme}` (zapraid, zone-write or zone-append)", at());
        };
        let Some(g) = index_of(&SETTINGS, setting) else {
            bail!("{}: unknown open-segment setting `{setting}` (4k, 16k, 2-2 or 1-3)", at());
        };
        let value: f64 = value
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v >= 0.0)
            .with_context(|| format!("{}: `{value}` is not a measurement (a number of at least 0)", at()))?;
        let cell = &mut results.values[e][g][s];
        if cell.is_some() {
            bail!("{}: {exp} {scheme} {setting} is measured twice", at());
        }
        *cell = Some(value);
    }
    Ok(results)
}

/// `a` over `b` as a signed percentage, where both were measured.
fn gain(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:+.1}%", (a / b - 1.0) * 100.0),
        _ => "-".into(),
    }
}

/// The table of one experiment, as printed.
fn table(exp: &Experiment, values: &[[Option<f64>; 3]; 4]) -> String {
    let mut t = format!("{}\n{}\n\n", exp.title, exp.workload);
    t += &format!("{:<16}", "open segments");
    for (_, name) in SCHEMES {
        t += &format!(" {:>22}", format!("{name} {}", exp.unit));
    }
    t += &format!(" {:>9} {:>9} {:>9} {:>9}\n", "vs ZW", "paper", "vs ZA", "paper");
    for (g, (_, setting)) in SETTINGS.iter().enumerate() {
        let row = &values[g];
        t += &format!("{setting:<16}");
        for v in row {
            t += &format!(" {:>22}", v.map_or("-".to_string(), |v| format!("{v:.1}")));
        }
        let (paper_zw, paper_za) = exp.paper[g];
        t += &format!(
            " {:>9} {:>9} {:>9} {:>9}\n",
            gain(row[0], row[1]),
            paper_zw.text(),
            gain(row[0], row[2]),
            paper_za.text()
        );
    }
    t += "(vs ZW, vs ZA: ZapRAID over ZoneWrite-Only and over ZoneAppend-Only, ours and the paper's; the paper gives \
          its findings as these ratios)\n";
    t
}

fn figure(exp: &Experiment, values: &[[Option<f64>; 3]; 4]) -> Figure {
    let series = SCHEMES
        .iter()
        .enumerate()
        .map(|(s, (_, name))| BarSeries::new(*name, values.iter().map(|row| row[s]).collect()))
        .collect();
    Figure {
        name: exp.key.into(),
        title: format!("{}, RAID-5 (3+1) in the QEMU guest", exp.title),
        panels: vec![Panel::Bars(Bars {
            caption: "by open-segment setting".into(),
            y_label: exp.unit.into(),
            groups: SETTINGS.iter().map(|(_, name)| name.to_string()).collect(),
            series,
        })],
    }
}

fn write_figures(dir: &Path, results: &Results) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("making the plot directory {}", dir.display()))?;
    for (e, exp) in EXPERIMENTS.iter().enumerate() {
        let path = write_svg(dir, &figure(exp, &results.values[e]))?;
        println!("figure: {}", path.display());
    }
    Ok(())
}

pub fn run(args: AppsReportArgs) -> Result<()> {
    let what = args.results.display().to_string();
    let text = std::fs::read_to_string(&args.results).with_context(|| format!("reading {what}"))?;
    let results = parse(&text, &what)?;
    let mut any = false;
    for (e, exp) in EXPERIMENTS.iter().enumerate() {
        if results.values[e].iter().flatten().any(Option::is_some) {
            println!("{}", table(exp, &results.values[e]));
            any = true;
        }
    }
    if !any {
        bail!("{what} holds no measurement");
    }
    if let Some(dir) = &args.plot {
        write_figures(dir, &results)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_measurements_into_their_cells() {
        let r = parse("# comment\nexp11 zapraid 4k 13.11\n\nexp12 zone-append 1-3 17.5\n", "t").unwrap();
        assert_eq!(r.values[0][0][0], Some(13.11));
        assert_eq!(r.values[1][3][2], Some(17.5));
        assert_eq!(r.values.iter().flatten().flatten().filter(|v| v.is_some()).count(), 2);
    }

    #[test]
    fn bad_lines_are_refused_with_their_line_number() {
        for (text, says) in [
            ("exp11 zapraid 4k", "t line 1: expected"),
            ("exp13 zapraid 4k 1", "unknown experiment `exp13`"),
            ("exp11 raizn 4k 1", "unknown scheme `raizn`"),
            ("exp11 zapraid 8k 1", "unknown open-segment setting `8k`"),
            ("exp11 zapraid 4k fast", "`fast` is not a measurement"),
            ("exp11 zapraid 4k NaN", "`NaN` is not a measurement"),
            ("exp11 zapraid 4k 1\nexp11 zapraid 4k 2", "t line 2: exp11 zapraid 4k is measured twice"),
        ] {
            let error = format!("{:#}", parse(text, "t").unwrap_err());
            assert!(error.contains(says), "{text:?}: {error}");
        }
    }

    #[test]
    fn table_sets_our_gains_beside_the_papers() {
        let r = parse("exp11 zapraid 4k 20\nexp11 zone-write 4k 10\nexp11 zone-append 4k 25\n", "t").unwrap();
        let t = table(&EXPERIMENTS[0], &r.values[0]);
        let row = t.lines().find(|l| l.starts_with("1 x 4 KiB")).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        // 1 x 4 KiB | 20.0 10.0 25.0 | +100.0% +76.9% | -20.0% similar
        assert_eq!(cells[4..], ["20.0", "10.0", "25.0", "+100.0%", "+76.9%", "-20.0%", "similar"]);
        let unmeasured = t.lines().find(|l| l.starts_with("(1,3)")).unwrap();
        assert!(unmeasured.split_whitespace().filter(|c| *c == "-").count() >= 5, "{unmeasured}");
        assert!(unmeasured.ends_with("+16.3%"), "{unmeasured}");
    }
}
