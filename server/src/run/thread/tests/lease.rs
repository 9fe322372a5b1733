//! Lending the engine to a host thread (`lease`): the host runs it, its stripe timer
//! included, and gives it back; an engine over drives that cannot signal is never lent.

use super::*;
use crate::run::thread::hosted::Turns;
use std::time::Duration;
use zapraid_zns::ZonedDevice;

/// How long a host waits for all its answers before the test fails: the engine is
/// stuck (a host that cannot see a completion or a timer waits forever otherwise).
const ANSWERS_WAIT: Duration = Duration::from_secs(30);

/// Sends `requests` to the engine from a host thread that runs the engine itself, as a
/// ublk queue does: turns after sending, sleeps on the engine's doorbell with its next
/// timer as the timeout. Returns the answers in tag order.
fn host_requests(thread: &EngineThread, requests: Vec<Request>) -> Vec<zapraid_engine::Result<Vec<u8>>> {
    let lease = thread.lease();
    let tx = thread.tx.clone();
    std::thread::scope(|scope| {
        scope
            .spawn(move || {
                let mut hosted =
                    lease.borrow(Duration::from_secs(5)).expect("an engine over signalling drives is lent");
                let bell = hosted.bell().clone();
                let (answer_tx, answers) = crossbeam_channel::unbounded();
                let ringer = bell.clone();
                let to = Arc::new(ReplyTo { tx: answer_tx, wake: Box::new(move || ringer.ring()), counted: true });
                let count = requests.len();
                for (tag, request) in requests.into_iter().enumerate() {
                    tx.send(Message::Io { tag: tag as u64, request, reply: to.clone() }).unwrap();
                }
                let started = Instant::now();
                let mut got: Vec<Option<zapraid_engine::Result<Vec<u8>>>> = (0..count).map(|_| None).collect();
                while got.iter().any(Option::is_none) {
                    assert!(started.elapsed() < ANSWERS_WAIT, "the hosted engine did not answer");
                    let turns = hosted.turns();
                    assert_ne!(turns, Turns::Stopped);
                    for (tag, result, _) in answers.try_iter() {
                        got[tag as usize] = Some(result);
                    }
                    if got.iter().all(Option::is_some) {
                        break;
                    }
                    // A busy engine (a drive file's commands still to reap) is turned again.
                    if turns != Turns::Busy {
                        hosted.sleep(ANSWERS_WAIT, || !answers.is_empty());
                    }
                }
                // A host that missed a completion or a timer slept far past it.
                assert!(started.elapsed() < ANSWERS_WAIT, "the hosted engine did not answer in time");
                got.into_iter().map(Option::unwrap).collect()
                // `hosted` is dropped here: the engine goes back to its thread.
            })
            .join()
            .unwrap()
    })
}

/// Over drives that signal an eventfd (as NVMe rings do), or drive files that complete
/// every command when reaped.
fn a_host_runs_the_engine_and_gives_it_back(threaded: bool) {
    let (_dir, _, paths, options) = drive_files();
    let formatted = format(&paths, &options, |_, _| {}).unwrap();
    let block = formatted.block_size_bytes as usize;
    let (thread, _) = spawn(assemble(&paths).unwrap(), threaded).unwrap();
    // A whole stripe and a part of one.
    let data: Vec<u8> = (0..5 * block).map(|i| (i * 13 % 251) as u8).collect();
    let answers = host_requests(&thread, vec![Request::Write { lba: 7, data: data.clone() }]);
    assert!(answers.iter().all(|a| a.is_ok()), "{answers:?}");
    // One block alone: nothing is in flight to wake the host, and its stripe is sealed
    // only once the stripe timer is due. A host that slept past the engine's next timer
    // would sleep `ANSWERS_WAIT` and fail (unless its first turn came after the timeout,
    // when that turn seals the stripe itself).
    let lone: Vec<u8> = (0..block).map(|i| (i * 7 % 241) as u8).collect();
    let answers = host_requests(&thread, vec![Request::Write { lba: 40, data: lone.clone() }]);
    assert!(answers.iter().all(|a| a.is_ok()), "{answers:?}");
    // Back on its own thread, the engine answers as before.
    let (to, answers) = reply();
    thread.tx.send(Message::Io { tag: 9, request: Request::Read { lba: 7, blocks: 5 }, reply: to }).unwrap();
    assert!(answers.recv().unwrap().1.unwrap() == data);
    // Lent again, then stopped on its thread.
    let again = host_requests(&thread, vec![Request::Read { lba: 7, blocks: 5 }]);
    assert!(again[0].as_ref().unwrap() == &data);
    thread.tx.send(Message::Stop).unwrap();
    thread.join().unwrap();
    // What the hosts wrote is on the drives.
    let (thread, _) = spawn(assemble(&paths).unwrap(), false).unwrap();
    let (to, answers) = reply();
    thread.tx.send(Message::Io { tag: 1, request: Request::Read { lba: 7, blocks: 5 }, reply: to }).unwrap();
    assert!(answers.recv().unwrap().1.unwrap() == data);
    let (to, answers) = reply();
    thread.tx.send(Message::Io { tag: 2, request: Request::Read { lba: 40, blocks: 1 }, reply: to }).unwrap();
    assert!(answers.recv().unwrap().1.unwrap() == lone);
    thread.tx.send(Message::Stop).unwrap();
    thread.join().unwrap();
}

#[test]
fn a_host_runs_the_engine_over_drives_signalling_an_eventfd() {
    a_host_runs_the_engine_and_gives_it_back(true);
}

#[test]
fn a_host_runs_the_engine_over_drives_completing_when_reaped() {
    a_host_runs_the_engine_and_gives_it_back(false);
}

/// A drive that neither signals completions nor completes every command when reaped
/// (as an emulated drive with a timing model): an engine thread must block on it.
struct Unsignalled(Drive);

impl ZonedDevice for Unsignalled {
    fn geometry(&self) -> Geometry {
        self.0.geometry()
    }
    fn queue_depth(&self) -> usize {
        self.0.queue_depth()
    }
    fn submit(&mut self, tag: u64, command: zapraid_zns::Command) {
        self.0.submit(tag, command)
    }
    fn reap(&mut self, out: &mut Vec<Completion>) -> usize {
        self.0.reap(out)
    }
    fn wait(&mut self, out: &mut Vec<Completion>) -> usize {
        self.0.wait(out)
    }
    fn in_flight(&self) -> usize {
        self.0.in_flight()
    }
}

#[test]
fn an_engine_over_drives_that_cannot_signal_is_not_lent() {
    let (_dir, _, paths, options) = drive_files();
    format(&paths, &options, |_, _| {}).unwrap();
    let mut assembled = assemble(&paths).unwrap();
    let engine = recover(&mut assembled).unwrap();
    let record = FailureRecord::of(&assembled);
    let block_size_bytes = assembled.superblock.block_size_bytes.get();
    let drives =
        assembled.drives.into_iter().map(|d| d.map_inner(|inner| Box::new(Unsignalled(inner)) as Drive)).collect();
    let thread = EngineThread::spawn(engine, drives, block_size_bytes, record, REBUILD_THREADS).unwrap();
    assert!(thread.lease().borrow(Duration::from_secs(30)).is_none());
    // The engine thread still serves.
    let (to, answers) = reply();
    thread.tx.send(Message::Io { tag: 1, request: Request::Read { lba: 0, blocks: 1 }, reply: to }).unwrap();
    assert!(answers.recv().unwrap().1.is_ok());
    thread.tx.send(Message::Stop).unwrap();
    thread.join().unwrap();
}
