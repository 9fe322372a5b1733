//! The CPU time of every thread of this process, for `zapraid bench cpu`'s server path:
//! each thread's time on a CPU in nanoseconds, read from `/proc/self/task/<tid>/schedstat`
//! (the scheduler's sum of the thread's run time, the clock CLOCK_THREAD_CPUTIME_ID reads),
//! and its time runnable but waiting for a CPU (the same file's second field: on a machine
//! others load, what they took from the run), with the thread's name from `comm`; and the
//! thread's user and system times from `stat` (in clock ticks, 10 ms on most kernels: for
//! the share spent in the kernel, in system calls such as the drive files' writes).
//!
//! A run takes a sample before and after its measured part; `window` gives each thread's
//! time between the two. Every thread of the process is in both samples, so nothing the run
//! spends is left out: a thread that ended between them is an error (its time is unknown),
//! and a thread born between them counts from zero.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};

/// One thread's CPU time so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct ThreadTime {
    pub tid: i32,
    pub name: String,
    pub cpu_ns: u64,
    /// Time runnable, waiting for a CPU.
    pub wait_ns: u64,
    /// User and system time in clock ticks (`stat`'s utime and stime).
    pub user_ticks: u64,
    pub system_ticks: u64,
}

/// Every thread of this process and its CPU time now, by thread id.
pub(super) fn sample() -> Result<BTreeMap<i32, ThreadTime>> {
    let mut threads = BTreeMap::new();
    let tasks = std::fs::read_dir("/proc/self/task").context("listing this process's threads in /proc/self/task")?;
    for task in tasks {
        let task = task.context("listing /proc/self/task")?;
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse::<i32>().ok()) else { continue };
        let path = task.path();
        let schedstat = match std::fs::read_to_string(path.join("schedstat")) {
            Ok(s) => s,
            // Ended since the listing: not one of the run's threads' (those are alive
            // until the second sample), or the second sample's check says so.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "reading {} (thread CPU time; the kernel needs CONFIG_SCHED_INFO)",
                        path.join("schedstat").display()
                    )
                })
            }
        };
        let (cpu_ns, wait_ns) = parse_schedstat(&schedstat).with_context(|| {
            format!("{} holds {schedstat:?}, not run and wait times", path.join("schedstat").display())
        })?;
        let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default().trim_end().to_string();
        let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
        let (user_ticks, system_ticks) = parse_stat(&stat)
            .with_context(|| format!("{} holds {stat:?}, not a thread's times", path.join("stat").display()))?;
        threads.insert(tid, ThreadTime { tid, name, cpu_ns, wait_ns, user_ticks, system_ticks });
    }
    Ok(threads)
}

/// The run and wait times in `schedstat`'s first two fields (ns on a CPU, ns runnable
/// waiting for one; then time slices).
fn parse_schedstat(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_whitespace().map(str::parse::<u64>);
    Some((fields.next()?.ok()?, fields.next()?.ok()?))
}

/// The user and system times (`utime`, `stime`: fields 14 and 15) of a `stat` line. The
/// name (field 2) is in parentheses and may hold spaces and parentheses: fields are counted
/// after its last `)`.
fn parse_stat(text: &str) -> Option<(u64, u64)> {
    let after_name = &text[text.rfind(')')? + 1..];
    // Field 3 (the state) is the first after the name.
    let mut fields = after_name.split_whitespace().skip(14 - 3);
    Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
}

/// Each thread's CPU time between `before` and `after`, in thread id order. A thread of
/// `before` missing from `after` ended in between, and its time there is unknown: an error,
/// since a figure without it would leave part of the run's CPU out.
pub(super) fn window(before: &BTreeMap<i32, ThreadTime>, after: &BTreeMap<i32, ThreadTime>) -> Result<Vec<ThreadTime>> {
    if let Some(gone) = before.values().find(|t| !after.contains_key(&t.tid)) {
        bail!(
            "thread {} ({}) ended during the measured run: its CPU time there is unknown, so the run's is",
            gone.tid,
            gone.name
        );
    }
    Ok(after
        .values()
        .map(|t| {
            let zero =
                ThreadTime { tid: t.tid, name: String::new(), cpu_ns: 0, wait_ns: 0, user_ticks: 0, system_ticks: 0 };
            let start = before.get(&t.tid).unwrap_or(&zero);
            debug_assert!(t.cpu_ns >= start.cpu_ns && t.wait_ns >= start.wait_ns, "a thread's times only grow");
            ThreadTime {
                tid: t.tid,
                name: t.name.clone(),
                cpu_ns: t.cpu_ns.saturating_sub(start.cpu_ns),
                wait_ns: t.wait_ns.saturating_sub(start.wait_ns),
                user_ticks: t.user_ticks.saturating_sub(start.user_ticks),
                system_ticks: t.system_ticks.saturating_sub(start.system_ticks),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_thread_is_sampled_with_its_time_and_name() {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("busy-sampled".into())
            .spawn(move || {
                // SAFETY: gettid takes nothing and cannot fail.
                let tid = unsafe { libc::gettid() };
                let started = std::time::Instant::now();
                let mut x = 0u64;
                while started.elapsed() < std::time::Duration::from_millis(30) {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
                ready_tx.send(tid).unwrap();
                done_rx.recv().unwrap();
            })
            .unwrap();
        let tid = ready_rx.recv().unwrap();
        let threads = sample().unwrap();
        let busy = &threads[&tid];
        assert_eq!(busy.name, "busy-sampled");
        // 30 ms of wall time spinning: some of it on a CPU however loaded the machine is.
        assert!(busy.cpu_ns > 0, "{busy:?}");
        done_tx.send(()).unwrap();
        t.join().unwrap();
    }

    #[test]
    fn the_window_counts_new_threads_from_zero_and_refuses_an_ended_one() {
        let at = |tid, cpu_ns: u64| {
            let (wait_ns, user_ticks, system_ticks) = (cpu_ns / 2, cpu_ns / 10, cpu_ns / 20);
            (tid, ThreadTime { tid, name: format!("t{tid}"), cpu_ns, wait_ns, user_ticks, system_ticks })
        };
        let before = BTreeMap::from([at(1, 100), at(2, 50)]);
        let after = BTreeMap::from([at(1, 160), at(2, 50), at(3, 7)]);
        let w = window(&before, &after).unwrap();
        let times: Vec<(i32, u64, u64, u64, u64)> =
            w.iter().map(|t| (t.tid, t.cpu_ns, t.wait_ns, t.user_ticks, t.system_ticks)).collect();
        assert_eq!(times, [(1, 60, 30, 6, 3), (2, 0, 0, 0, 0), (3, 7, 3, 0, 0)]);
        let ended = BTreeMap::from([at(1, 160)]);
        let e = window(&before, &ended).unwrap_err().to_string();
        assert!(e.contains("thread 2 (t2) ended"), "{e}");
        assert_eq!(parse_schedstat("52775553 2875827 152\n"), Some((52_775_553, 2_875_827)));
        assert_eq!(parse_schedstat(""), None);
        let stat = "4242 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 71 29 0 0 20 0 1 0 5 6 7";
        assert_eq!(parse_stat(stat), Some((71, 29)));
        assert_eq!(parse_stat("4242 (x) S 1 2"), None);
    }
}
