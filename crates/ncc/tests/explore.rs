//! The model checker over the smallest configurations with a timestamp inversion (2
//! servers, 3 clients, 2 keys): every schedule of message arrivals and client starts.
//! NCC passes all of them; without response timing control it fails, and without early
//! abort it deadlocks.

use verso_ncc::explore::{explore, ExploreOptions, ExploreReport};
use verso_ncc::{Mistakes, Op};

const A: u64 = 0;
const B: u64 = 1;

fn options(programs: Vec<(u64, Vec<Op>)>, mistakes: Mistakes) -> ExploreOptions {
    ExploreOptions {
        servers: 2,
        programs,
        mistakes,
        read_only_protocol: true,
        attempts_max: 2,
        states_max: 3_000_000,
        crash: None,
        timer_fires: None,
    }
}

/// Figure 3's shape: two single-key readers and a writer of both keys, with the paper's
/// timestamps (10, 5, 7).
fn figure_3() -> Vec<(u64, Vec<Op>)> {
    vec![
        (10, vec![Op::read(A)]),
        (5, vec![Op::read(B)]),
        (7, vec![Op::write(A, 31), Op::write(B, 32)]),
    ]
}

/// Write skew and a reader: each writer reads the key the other writes.
fn write_skew() -> Vec<(u64, Vec<Op>)> {
    vec![
        (10, vec![Op::read(A), Op::write(B, 11)]),
        (12, vec![Op::read(B), Op::write(A, 21)]),
        (11, vec![Op::read(A)]),
    ]
}

fn check(programs: Vec<(u64, Vec<Op>)>) -> ExploreReport {
    for read_only_protocol in [true, false] {
        let mut o = options(programs.clone(), Mistakes::default());
        o.read_only_protocol = read_only_protocol;
        let r = explore(&o).unwrap_or_else(|e| panic!("{e}"));
        assert!(r.final_states > 0, "{r:?}");
        eprintln!("{r:?}");
    }
    explore(&options(programs, Mistakes::default())).expect("checked above")
}

#[test]
fn every_schedule_of_figure_3_is_strictly_serializable() {
    check(figure_3());
}

#[test]
fn every_schedule_of_write_skew_is_strictly_serializable() {
    check(write_skew());
}

#[test]
fn blind_writers_of_both_keys_are_strictly_serializable() {
    check(vec![
        (10, vec![Op::write(A, 11), Op::write(B, 12)]),
        (9, vec![Op::write(B, 21)]),
        (11, vec![Op::read(A)]),
    ]);
}

#[test]
fn without_timing_control_some_schedule_breaks_figure_3() {
    // Its readers run as read-write transactions: read-only ones are never queued, so
    // response timing control does not apply to them.
    let mut o = options(
        figure_3(),
        Mistakes {
            no_timing_control: true,
            ..Mistakes::default()
        },
    );
    o.read_only_protocol = false;
    let e = explore(&o).unwrap_err();
    assert!(e.contains("not strictly serializable"), "{e}");
}

#[test]
fn without_early_abort_some_schedule_deadlocks() {
    let o = options(
        write_skew(),
        Mistakes {
            no_early_abort: true,
            ..Mistakes::default()
        },
    );
    let e = explore(&o).unwrap_err();
    assert!(e.contains("deadlock"), "{e}");
}

/// Client failure (App. D): client 0 writes both keys and may crash at any moment; client
/// 1 reads one of them; the servers' recovery timers fire at any moment (twice by choice,
/// then as often as needed once nothing else can happen). Every schedule
/// decides every transaction the same way at every cohort and stays strictly
/// serializable, the crashed client's transaction included if its backup committed it.
#[test]
fn a_crashing_client_is_recovered_in_every_schedule() {
    for read_only_protocol in [true, false] {
        let mut o = options(
            vec![
                (10, vec![Op::write(A, 11), Op::write(B, 12)]),
                (12, vec![Op::read(B)]),
            ],
            Mistakes::default(),
        );
        o.read_only_protocol = read_only_protocol;
        o.crash = Some(0);
        o.timer_fires = Some(2);
        let r = explore(&o).unwrap_or_else(|e| panic!("{e}"));
        assert!(r.final_states > 0, "{r:?}");
        eprintln!("{r:?}");
    }
}

/// The same with a reader-writer whose pairs may need smart retry, racing a writer
/// with a lower timestamp.
#[test]
fn a_crashing_reader_writer_is_recovered_in_every_schedule() {
    let mut o = options(
        vec![
            (10, vec![Op::read(A), Op::write(B, 11)]),
            (9, vec![Op::write(A, 21)]),
        ],
        Mistakes::default(),
    );
    o.crash = Some(0);
    o.timer_fires = Some(2);
    let r = explore(&o).unwrap_or_else(|e| panic!("{e}"));
    assert!(r.final_states > 0, "{r:?}");
    eprintln!("{r:?}");
}

/// A backup that aborts cleared records is caught by the model checker too.
#[test]
fn a_backup_aborting_cleared_records_fails_some_schedule() {
    let mut o = options(
        vec![
            (10, vec![Op::write(A, 11), Op::write(B, 12)]),
            (12, vec![Op::read(A), Op::read(B)]),
        ],
        Mistakes {
            backup_aborts_cleared: true,
            ..Mistakes::default()
        },
    );
    o.crash = Some(0);
    o.timer_fires = Some(2);
    let e = explore(&o).unwrap_err();
    assert!(
        e.contains("after it was") || e.contains("at another"),
        "{e}"
    );
}

/// Server-side read-modify-writes (`Op::ReadWrite`) racing a blind writer with a lower
/// timestamp and a reader of both keys.
#[test]
fn read_writes_are_strictly_serializable() {
    check(vec![
        (10, vec![Op::read_write(A, 11), Op::write(B, 12)]),
        (9, vec![Op::write(A, 21)]),
        (11, vec![Op::read(A), Op::read(B)]),
    ]);
}
