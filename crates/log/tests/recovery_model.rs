//! Model-based test of recovery: logs built as the logger writes them (per round, each log
//! gets its transactions of the closing epoch, then that epoch's mark), cut at random points
//! (a crash), optionally followed by garbage (a torn page). Recovery must replay exactly the
//! transactions with an epoch at or below the smallest last intact mark, and no others.

use std::collections::BTreeSet;

use proptest::prelude::*;
use verso_log::encode::{append_header, append_mark, append_pad_to, append_txn, LogHeader};
use verso_log::{replay_logs, DataDir, LogFileId, OsStorage, ReplayFrom, LOG_FORMAT_VERSION};

#[derive(Debug, Clone)]
struct Plan {
    logs: usize,
    /// Per round, per log: how many transactions it logs in that round's epoch.
    rounds: Vec<Vec<u8>>,
    /// Per log: where the crash cuts it, as a fraction of its length in 1/1000.
    cuts: Vec<u16>,
    garbage: Vec<u8>,
    skip_below_ts: u64,
}

fn plan() -> impl Strategy<Value = Plan> {
    (1usize..4).prop_flat_map(|logs| {
        (
            Just(logs),
            prop::collection::vec(prop::collection::vec(0u8..4, logs), 0..12),
            prop::collection::vec(0u16..=1000, logs),
            prop::collection::vec(any::<u8>(), 0..24),
            prop_oneof![Just(0u64), 0u64..60],
        )
            .prop_map(|(logs, rounds, cuts, garbage, skip_below_ts)| Plan {
                logs,
                rounds,
                cuts,
                garbage,
                skip_below_ts,
            })
    })
}

/// One logged transaction: (log, epoch, ts) identifies it; its one write names its ts.
type Txn = (usize, u64, u64);

/// Replays every log from the start (skipping timestamps below `skip_below_ts`); returns
/// the timestamps replayed, each checked to appear once.
fn replay(
    data: &DataDir,
    skip_below_ts: u64,
) -> Result<(BTreeSet<u64>, verso_log::ReplaySummary), TestCaseError> {
    let mut got = BTreeSet::new();
    let from = ReplayFrom {
        generation: 0,
        seq: 0,
        ts: skip_below_ts,
    };
    let summary = replay_logs(data, from, false, &mut |_, _| {}, &mut |ts, w| {
        assert_eq!(w.key, ts.to_be_bytes());
        assert!(got.insert(ts), "ts {ts} replayed twice");
    })
    .map_err(|e| TestCaseError::fail(e.to_string()))?;
    Ok((got, summary))
}

fn run(plan: &Plan) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let (data, _) = DataDir::open(dir.path(), std::sync::Arc::new(OsStorage)).unwrap();
    let first_epoch = 5u64;
    let mut files: Vec<Vec<u8>> = Vec::new();
    // Per log: the (end offset, txn) of each transaction, and (end offset, epoch) of marks.
    let mut txns: Vec<Vec<(usize, Txn)>> = vec![Vec::new(); plan.logs];
    let mut marks: Vec<Vec<(usize, u64)>> = vec![Vec::new(); plan.logs];
    for (log, log_marks) in marks.iter_mut().enumerate() {
        let mut bytes = Vec::new();
        append_header(
            &mut bytes,
            &LogHeader {
                format_version: LOG_FORMAT_VERSION,
                generation: 1,
                log: log as u32,
                seq: 0,
            },
        );
        append_mark(&mut bytes, first_epoch - 1);
        log_marks.push((bytes.len(), first_epoch - 1));
        files.push(bytes);
    }
    let mut ts = 0u64;
    for (r, per_log) in plan.rounds.iter().enumerate() {
        let epoch = first_epoch + r as u64;
        for (log, &n) in per_log.iter().enumerate() {
            for _ in 0..n {
                ts += 1;
                let key = ts.to_be_bytes();
                append_txn(
                    &mut files[log],
                    epoch,
                    ts,
                    [(0u32, &key[..], Some(&b"v"[..]))].into_iter(),
                );
                txns[log].push((files[log].len(), (log, epoch, ts)));
            }
            append_mark(&mut files[log], epoch);
            marks[log].push((files[log].len(), epoch));
            // The logger pads every round to a block boundary (smaller blocks here).
            append_pad_to(&mut files[log], 256);
        }
    }
    // Crash: cut each file, maybe add garbage after the cut.
    let mut cut_marks = Vec::new();
    let mut surviving: Vec<Txn> = Vec::new();
    for log in 0..plan.logs {
        let len = files[log].len();
        let cut = len * plan.cuts[log] as usize / 1000;
        let mut bytes = files[log][..cut].to_vec();
        bytes.extend_from_slice(&plan.garbage);
        // Garbage that happens to repeat the bytes it replaced restores them (a mark ends in
        // zero bytes, and a zero of garbage after a cut one byte short completes it): the
        // crash image then holds the original up to where they differ.
        let cut = cut
            + plan
                .garbage
                .iter()
                .zip(&files[log][cut..])
                .take_while(|(g, o)| g == o)
                .count();
        let id = LogFileId {
            generation: 1,
            log: log as u32,
            seq: 0,
        };
        std::fs::write(data.log_path(id), &bytes).unwrap();
        let last_mark = marks[log]
            .iter()
            .filter(|(end, _)| *end <= cut)
            .map(|m| m.1)
            .max();
        cut_marks.push(last_mark.unwrap_or(0));
        surviving.extend(txns[log].iter().filter(|(end, _)| *end <= cut).map(|t| t.1));
    }
    let cut = *cut_marks.iter().min().unwrap();
    let expected: BTreeSet<u64> = surviving
        .iter()
        .filter(|t| t.1 <= cut && t.2 >= plan.skip_below_ts)
        .map(|t| t.2)
        .collect();
    let dropped = surviving.iter().filter(|t| t.1 > cut).count() as u64;
    let (got, summary) = replay(&data, plan.skip_below_ts)?;
    prop_assert_eq!(&got, &expected);
    prop_assert_eq!(summary.txns_dropped, dropped);
    // Every transaction of an epoch at or below the cut survived the crash in full.
    let all_below_cut = txns.iter().flatten().filter(|t| t.1 .1 <= cut).count();
    let survived_below_cut = surviving.iter().filter(|t| t.1 <= cut).count();
    prop_assert_eq!(all_below_cut, survived_below_cut);
    // Recovery is idempotent: the torn tails were cut, a second pass agrees.
    let (again, _) = replay(&data, plan.skip_below_ts)?;
    prop_assert_eq!(again, expected);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn recovery_replays_exactly_the_consistent_cut(plan in plan()) {
        run(&plan)?;
    }
}
