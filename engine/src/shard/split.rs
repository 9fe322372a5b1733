//! A request to the array cut into per-shard requests (`ShardMap::split`), and their
//! responses joined into the array's (`Join`).
//!
//! A request over LBAs goes to each shard it touches as one request: the units it covers on
//! a shard are contiguous in that shard's LBAs. Write data and checksums are gathered per
//! shard, read data is put back in LBA order, and of several errors the array answers the
//! one of the part holding the lowest LBA (parts are ordered so), with any LBA or zone it
//! names translated to the array's (`ShardMap::array_error`). A flush goes to every
//! shard. A request that touches one shard goes to it as it is (its LBA translated), so
//! an array of one shard answers exactly as the engine does.

use crate::checksum::{BlockChecksums, ReadChecks};
use crate::engine::{Request, RequestId, Response};
use crate::error::{Error, Result};

use super::map::ShardMap;

/// One shard's share of a request.
#[derive(Debug)]
pub struct Part {
    pub shard: usize,
    pub request: Request,
}

/// A request cut into parts (in the order their first blocks have in the array), and
/// what joins their responses.
#[derive(Debug)]
pub struct Split {
    pub parts: Vec<Part>,
    pub join: Join,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Read,
    ReadUnverified,
    Write,
    WriteWithChecksums,
    Flush,
    Discard,
}

/// Where one part's blocks are: its shard and its run of that shard's LBAs.
#[derive(Clone, Copy, Debug)]
struct Place {
    shard: usize,
    local_lba: u64,
    blocks: u64,
}

type Answer = (Result<Vec<u8>>, Option<ReadChecks>);

/// The responses of a split request's parts, gathered until every part has answered.
#[derive(Debug)]
pub struct Join {
    map: ShardMap,
    kind: Kind,
    lba: u64,
    blocks: u64,
    places: Vec<Place>,
    answers: Vec<Option<Answer>>,
    left: usize,
    /// A buffer the frontend handed over for the answer (`Request::ReadUnverified`).
    buffer: Vec<u8>,
    /// Whether the parts' errors come in the array's terms already (each shard's thread
    /// translates its own: `errors_in_array_terms`).
    errors_translated: bool,
}

impl ShardMap {
    /// Cuts `request` into one request per shard it touches; an error for a request no
    /// shard can take (outside the logical blocks, data not whole blocks, checksums that
    /// do not count its blocks).
    pub fn split(&self, request: Request) -> Result<Split> {
        let (kind, lba, blocks) = match &request {
            Request::Flush => return Ok(self.flush()),
            Request::Read { lba, blocks } => (Kind::Read, *lba, *blocks),
            Request::ReadUnverified { lba, blocks, .. } => (Kind::ReadUnverified, *lba, *blocks),
            Request::Discard { lba, blocks } => (Kind::Discard, *lba, *blocks),
            Request::Write { lba, data } => (Kind::Write, *lba, self.whole_blocks(data)?),
            Request::WriteWithChecksums { lba, data, .. } => (Kind::WriteWithChecksums, *lba, self.whole_blocks(data)?),
        };
        if self.shards == 1 {
            // The engine's own checks, word for word: nothing to translate.
            let place = Place { shard: 0, local_lba: lba, blocks };
            return Ok(self.one_part(kind, lba, blocks, place, request));
        }
        self.check_range(lba, blocks)?;
        let places = self.places(lba, blocks);
        if let [place] = places[..] {
            let request = with_lba(request, place.local_lba);
            return Ok(self.one_part(kind, lba, blocks, place, request));
        }
        let mut buffer = Vec::new();
        let parts = match request {
            Request::Read { .. } => {
                places.iter().map(|p| Request::Read { lba: p.local_lba, blocks: p.blocks }).collect()
            }
            Request::ReadUnverified { buffer: given, .. } => {
                buffer = given;
                let part =
                    |p: &Place| Request::ReadUnverified { lba: p.local_lba, blocks: p.blocks, buffer: Vec::new() };
                places.iter().map(part).collect()
            }
            Request::Discard { .. } => {
                places.iter().map(|p| Request::Discard { lba: p.local_lba, blocks: p.blocks }).collect()
            }
            Request::Write { data, .. } => {
                places.iter().map(|p| Request::Write { lba: p.local_lba, data: self.gather(lba, p, &data) }).collect()
            }
            Request::WriteWithChecksums { data, checksums, .. } => {
                if checksums.blocks() as u64 != blocks {
                    let reason = format!("{} block checksums for a write of {blocks} blocks", checksums.blocks());
                    return Err(Error::InvalidConfig { reason });
                }
                let part = |p: &Place| Request::WriteWithChecksums {
                    lba: p.local_lba,
                    data: self.gather(lba, p, &data),
                    checksums: BlockChecksums::from_crcs(
                        self.runs(lba, p)
                            .flat_map(|(at, _, len)| (at..at + len).map(|block| checksums.get(block as usize))),
                    ),
                };
                places.iter().map(part).collect::<Vec<_>>()
            }
            Request::Flush => unreachable!("answered above"),
        };
        let parts = places.iter().zip(parts).map(|(p, request)| Part { shard: p.shard, request }).collect();
        Ok(Split { parts, join: self.join(kind, lba, blocks, places, buffer) })
    }

    fn flush(&self) -> Split {
        let places: Vec<Place> = (0..self.shards()).map(|shard| Place { shard, local_lba: 0, blocks: 0 }).collect();
        let parts = places.iter().map(|p| Part { shard: p.shard, request: Request::Flush }).collect();
        Split { parts, join: self.join(Kind::Flush, 0, 0, places, Vec::new()) }
    }

    fn one_part(&self, kind: Kind, lba: u64, blocks: u64, place: Place, request: Request) -> Split {
        let join = self.join(kind, lba, blocks, vec![place], Vec::new());
        Split { parts: vec![Part { shard: place.shard, request }], join }
    }

    fn join(&self, kind: Kind, lba: u64, blocks: u64, places: Vec<Place>, buffer: Vec<u8>) -> Join {
        let answers = places.iter().map(|_| None).collect();
        Join { map: *self, kind, lba, blocks, left: places.len(), places, answers, buffer, errors_translated: false }
    }

    fn whole_blocks(&self, data: &[u8]) -> Result<u64> {
        if !data.len().is_multiple_of(self.block_bytes) {
            let reason = format!("a write of {} bytes is not whole blocks of {}", data.len(), self.block_bytes);
            return Err(Error::InvalidConfig { reason });
        }
        Ok((data.len() / self.block_bytes) as u64)
    }

    /// The engine's range check (`Engine::check_range`) over the array's logical blocks.
    fn check_range(&self, lba: u64, blocks: u64) -> Result<()> {
        match lba.checked_add(blocks) {
            Some(end) if blocks > 0 && end <= self.logical_blocks => Ok(()),
            _ => Err(Error::InvalidConfig {
                reason: format!("{blocks} blocks at LBA {lba} outside the {} logical blocks", self.logical_blocks),
            }),
        }
    }

    /// The run of each shard's LBAs that [lba, lba + blocks) covers, in the order of their
    /// first blocks in the array.
    fn places(&self, lba: u64, blocks: u64) -> Vec<Place> {
        let mut places: Vec<Place> = Vec::new();
        let mut at = lba;
        while at < lba + blocks && places.len() < self.shards() {
            let (shard, local_lba) = self.locate(at);
            places.push(Place { shard, local_lba, blocks: 0 });
            at = (at / self.unit_blocks + 1) * self.unit_blocks;
        }
        // Each shard's blocks of the range: whole rounds of units, and the rest.
        let end = lba + blocks;
        for place in &mut places {
            let (_, local_end) = self.locate_end(place.shard, end);
            place.blocks = local_end - place.local_lba;
            debug_assert!(place.blocks > 0);
        }
        places
    }

    /// The first LBA of shard `shard` at or after array LBA `end` (its local end of a range
    /// ending there).
    fn locate_end(&self, shard: usize, end: u64) -> (usize, u64) {
        let (at, local) = self.locate(end);
        let unit_start = local - local % self.unit_blocks;
        match at.cmp(&shard) {
            std::cmp::Ordering::Equal => (shard, local),
            std::cmp::Ordering::Greater => (shard, unit_start + self.unit_blocks),
            std::cmp::Ordering::Less => (shard, unit_start),
        }
    }

    /// The runs of place `p` of a request at `lba`: (block in the request, block in the
    /// part, blocks), in order.
    fn runs(&self, lba: u64, p: &Place) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        let (shard, first, end) = (p.shard, p.local_lba, p.local_lba + p.blocks);
        let mut local = first;
        std::iter::from_fn(move || {
            (local < end).then(|| {
                let len = (self.unit_blocks - local % self.unit_blocks).min(end - local);
                let run = (self.array_lba(shard, local) - lba, local - first, len);
                local += len;
                run
            })
        })
    }

    /// Place `p`'s blocks of write data `data` (of a request at `lba`).
    fn gather(&self, lba: u64, p: &Place, data: &[u8]) -> Vec<u8> {
        let bb = self.block_bytes;
        let mut out = Vec::with_capacity(p.blocks as usize * bb);
        for (at, _, len) in self.runs(lba, p) {
            out.extend_from_slice(&data[at as usize * bb..(at + len) as usize * bb]);
        }
        out
    }
}

/// The request with its LBA replaced (one that touches one shard).
fn with_lba(request: Request, local: u64) -> Request {
    match request {
        Request::Read { blocks, .. } => Request::Read { lba: local, blocks },
        Request::ReadUnverified { blocks, buffer, .. } => Request::ReadUnverified { lba: local, blocks, buffer },
        Request::Discard { blocks, .. } => Request::Discard { lba: local, blocks },
        Request::Write { data, .. } => Request::Write { lba: local, data },
        Request::WriteWithChecksums { data, checksums, .. } => {
            Request::WriteWithChecksums { lba: local, data, checksums }
        }
        Request::Flush => Request::Flush,
    }
}

impl Join {
    /// The parts' errors will name the array's LBAs and the drives' zones already (their
    /// shards said them so, `ShardMap::array_error`): passed on as they are.
    pub fn errors_in_array_terms(&mut self) {
        self.errors_translated = true;
    }

    /// Parts still to answer.
    pub fn left(&self) -> usize {
        self.left
    }

    /// Part `part`'s response; true once every part has answered (then `finish`).
    pub fn answer(&mut self, part: usize, response: Response) -> bool {
        debug_assert!(self.answers[part].is_none(), "part {part} answered twice");
        if self.answers[part].replace((response.result, response.checks)).is_none() {
            self.left -= 1;
        }
        self.left == 0
    }

    /// The array's response to request `id`, once every part has answered.
    pub fn finish(mut self, id: RequestId) -> Response {
        debug_assert_eq!(self.left, 0, "a join finished before every part answered");
        let answers: Vec<Answer> = std::mem::take(&mut self.answers).into_iter().flatten().collect();
        if answers.len() != self.places.len() {
            let reason = format!("{} of {} shards answered", answers.len(), self.places.len());
            return Response { id, result: Err(Error::Unavailable { reason }), checks: None };
        }
        if let Some(at) = answers.iter().position(|(result, _)| result.is_err()) {
            let shard = self.places[at].shard;
            let error = answers.into_iter().nth(at).and_then(|(result, _)| result.err()).expect("an error");
            let error = if self.errors_translated { error } else { self.map.array_error(shard, error) };
            return Response { id, result: Err(error), checks: None };
        }
        if let [_] = self.places[..] {
            let (result, checks) = answers.into_iter().next().expect("one answer");
            return Response { id, result, checks };
        }
        match self.kind {
            Kind::Read | Kind::ReadUnverified => self.join_reads(id, answers),
            // Its answer is a buffer of its length for the frontend to reuse.
            Kind::WriteWithChecksums => {
                let bytes = self.blocks as usize * self.map.block_bytes();
                let mut buffer =
                    answers.into_iter().filter_map(|(r, _)| r.ok()).max_by_key(Vec::len).unwrap_or_default();
                buffer.resize(bytes, 0);
                Response { id, result: Ok(buffer), checks: None }
            }
            Kind::Write | Kind::Flush | Kind::Discard => Response { id, result: Ok(Vec::new()), checks: None },
        }
    }

    /// The parts' read data (and checks) in LBA order.
    fn join_reads(mut self, id: RequestId, answers: Vec<Answer>) -> Response {
        let bb = self.map.block_bytes();
        let mut data = std::mem::take(&mut self.buffer);
        data.clear();
        data.resize(self.blocks as usize * bb, 0);
        let mut checks = vec![None; if self.kind == Kind::ReadUnverified { self.blocks as usize } else { 0 }];
        for (place, (result, part_checks)) in self.places.iter().zip(answers) {
            let part = result.expect("errors answered above");
            let part_checks = match (self.kind, part_checks) {
                (Kind::ReadUnverified, Some(c)) if c.blocks() as u64 == place.blocks => Some(c),
                (Kind::ReadUnverified, _) => return self.broken(id, place, "its checks"),
                _ => None,
            };
            if part.len() != place.blocks as usize * bb {
                return self.broken(id, place, "its data");
            }
            for (at, from, len) in self.map.runs(self.lba, place) {
                let (at, from, len) = (at as usize, from as usize, len as usize);
                data[at * bb..(at + len) * bb].copy_from_slice(&part[from * bb..(from + len) * bb]);
                if let Some(c) = &part_checks {
                    checks[at..at + len].clone_from_slice(&c.metadata()[from..from + len]);
                }
            }
        }
        let checks = (self.kind == Kind::ReadUnverified).then_some(ReadChecks::Many(checks));
        Response { id, result: Ok(data), checks }
    }

    /// The answer to a read whose part came back without what it must hold (a shard's
    /// bug: refused rather than answered wrong).
    fn broken(&self, id: RequestId, place: &Place, what: &str) -> Response {
        debug_assert!(false, "shard {} answered a read of {} blocks without {what}", place.shard, place.blocks);
        let reason = format!("shard {} answered a read of {} blocks without {what}", place.shard, place.blocks);
        Response { id, result: Err(Error::Unavailable { reason }), checks: None }
    }
}
