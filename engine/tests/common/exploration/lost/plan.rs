//! How a lost-block run is drawn from its seed (the array, the faults, their steps, the
//! power cut) and how the runs of an exploration add up; the run itself is `LostRun`.

use super::*;

/// One lost-block run: its faults, their steps and the power cut drawn from `seed`.
pub fn lost_run(scheme: Scheme, seed: u64) -> LostOutcome {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x1057);
    let (k, m) = scheme.level.shape();
    let drives = k + m;
    let failures = match seed % 4 {
        0 => Failures::None,
        1 => Failures::Within { left_failed: rng.random_bool(0.5) },
        2 => Failures::DuringRebuild,
        _ => Failures::Beyond,
    };
    let zones = if rng.random_bool(0.75) { scheme.few_zones() } else { ZONES };
    let l2p = rng.random_bool(0.5).then(|| (rng.random_range(2..=16), rng.random_range(1..=3)));
    let writes = if zones == ZONES { 120 } else { 300 };
    // Steps of the workload, roughly: faults land within it.
    let span = writes * 6;
    let mut events: Vec<(usize, Event)> = Vec::new();
    for _ in 0..rng.random_range(1..=3) {
        events.push((rng.random_range(0..span), Event::Damage));
    }
    for _ in 0..rng.random_range(0..=2) {
        events.push((rng.random_range(0..span), Event::Scrub));
    }
    let mut order: Vec<usize> = (0..drives).collect();
    for i in 0..drives {
        order.swap(i, rng.random_range(i..drives));
    }
    let first = rng.random_range(0..span / 2);
    match failures {
        Failures::None => {}
        Failures::Within { left_failed } => {
            events.push((first, Event::Fail(order[0])));
            if !left_failed {
                events.push((first + rng.random_range(0..span / 2), Event::Replace(order[0])));
            }
        }
        Failures::DuringRebuild => {
            let replaced = first + rng.random_range(0..span / 4);
            events.push((first, Event::Fail(order[0])));
            events.push((replaced, Event::Replace(order[0])));
            for &d in &order[1..=m] {
                events.push((replaced + 1 + rng.random_range(0..40), Event::Fail(d)));
            }
        }
        Failures::Beyond => {
            for &d in &order[..=m] {
                events.push((rng.random_range(0..span), Event::Fail(d)));
            }
        }
    }
    events.sort_by_key(|(at, _)| *at);
    let cut_at = rng.random_bool(0.7).then(|| rng.random_range(0..span * 2));
    let l2p_config = l2p.map_or_else(L2pConfig::default, |(page_entries, budget_pages)| L2pConfig {
        budget_bytes: Some(budget_pages * BLOCK as u64),
        page_entries: Some(page_entries),
        checkpoint: true,
    });
    let config = Config { l2p: l2p_config, ..config(scheme) };
    let label = format!("{scheme}, {zones} zones, L2P {l2p:?}, {failures:?}, cut at {cut_at:?}, {events:?}");
    let sim = Simulator::new(geometry(zones), config, seed, None).unwrap();
    let run = Run::new(label, sim);
    let mut lr = LostRun {
        run,
        scheme,
        config,
        zones,
        seed,
        rng,
        steps: 0,
        pending: HashMap::new(),
        may_lose: HashSet::new(),
        damaged_zones: BTreeSet::new(),
        last_beyond: None,
        events,
        cut_at,
        scrub_started_at: None,
        gc_probes: Vec::new(),
        checkpoints: Checkpoints::default(),
        out: LostOutcome { runs: 1, ..LostOutcome::default() },
    };
    // The workload: writes and reads of random blocks, each followed by a few steps.
    for _ in 0..writes {
        lr.write();
        if lr.rng.random_bool(0.2) {
            let lba = lr.rng.random_range(0..LOGICAL_BLOCKS);
            lr.read(lba);
        }
        for _ in 0..lr.rng.random_range(0..12) {
            if !lr.step() {
                break;
            }
        }
    }
    lr.settle("the workload");
    // Every failed drive beyond tolerance (or all, unless one is meant to stay failed)
    // replaced and rebuilt, one after the other.
    let keep_failed = matches!(failures, Failures::Within { left_failed: true });
    loop {
        let failed = lr.run.sim.engine.status().failed_drives;
        let Some(&drive) = failed.first().filter(|_| !keep_failed || lr.beyond_tolerance()) else { break };
        let status = lr.run.sim.engine.status();
        assert!(lr.replace(drive), "{}: a rebuild waits for nothing: {status:?}", lr.what());
        lr.settle("a rebuild");
    }
    // The power cut came or never will: the counts below read every block in turn.
    lr.cut_at = None;
    assert!(!lr.beyond_tolerance(), "{}", lr.what());
    if let Some(r) = lr.run.sim.engine.status().rebuild {
        panic!("{}: a rebuild still runs after settling: {r:?}", lr.what());
    }
    let lost = lr.count_lost("at the end");
    // The markers persist through a clean stop and start.
    lr.stop_and_start();
    let after_stop = lr.count_lost("after a clean stop and start");
    assert_eq!(lost, after_stop, "{}: lost blocks changed across a clean stop", lr.what());
    // A write heals one; the others stay lost through a crash and start.
    let mut lost = lost;
    if let Some(&healed) = lost.iter().next() {
        let id = lr.run.next_id;
        lr.run.next_id += 1;
        let w = lr.run.next_write;
        lr.run.next_write += 1;
        lr.run.history.entry(healed).or_default().writes.push((w, true));
        lr.run.sim.submit(id, Request::Write { lba: healed, data: block(healed, w) });
        let what = lr.what();
        let answer = lr.run.sim.run_until_response(id).unwrap_or_else(|| panic!("{what}: healing write unanswered"));
        answer.result.unwrap_or_else(|e| panic!("{what}: a write of lost LBA {healed} failed: {e}"));
        lost.remove(&healed);
        lr.out.healed += 1;
    }
    lr.settle("after the healing write");
    lr.cut_at = Some(0);
    lr.step();
    let after_crash = lr.count_lost("after a crash and start");
    assert_eq!(lost, after_crash, "{}: lost blocks changed across a crash", lr.what());
    lr.out.blocks_lost += lost.len() as u64;
    lr.out
}

/// Lost-block runs for every scheme, `runs` each; panics at the first violation.
pub fn explore_lost(schemes: &[Scheme], runs: usize) -> LostOutcome {
    let mut out = LostOutcome::default();
    for (i, &scheme) in schemes.iter().enumerate() {
        for run in 0..runs {
            out += lost_run(scheme, (i * runs + run) as u64);
        }
    }
    out
}
