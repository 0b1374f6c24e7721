//! `verso bench wire`: what encoding and decoding a transaction message costs in each of
//! its byte forms (binary and RESP, `verso_ncc::wire`), without the network: the part of
//! `verso bench txn --wire binary,resp`'s difference that the encoding itself accounts for.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use verso_ncc::wire::{Encoding, Wire};
use verso_ncc::{ExecResult, Msg, Op, OpReply, Ts, TxnId, Value};

#[derive(Args, Debug)]
pub struct BenchWireArgs {
    /// Encode-and-decode rounds of the message set per measurement.
    #[arg(long, default_value_t = 200_000)]
    rounds: u32,
    /// Measurements per encoding, interleaved (binary, resp, binary, ...); medians printed.
    #[arg(long, default_value_t = 5)]
    runs: u32,
}

/// One F1 read-only transaction's messages at one server as `verso bench txn` sends them:
/// three reads of keys below 1 M at a microsecond clock, the reply with three values, and
/// a read-write transaction's decision and its acknowledgement.
fn f1_messages() -> Vec<(&'static str, Msg)> {
    let txn = TxnId {
        client: 17,
        seq: 123_456,
    };
    let clk = 1_795_000_000_123_456;
    let ts = |c: u32, d: u64| Ts {
        clk: clk + d,
        cid: c,
    };
    vec![
        (
            "execute",
            Msg::Execute {
                txn,
                ts: ts(17, 0),
                shot: 0,
                ops: vec![Op::read(912_345), Op::read(40_017), Op::read(7_771)],
                t_ro: Some(clk - 2_000),
                coord: 1,
                cohorts: None,
                done: verso_ncc::Finished {
                    from: 123_001,
                    below: 123_440,
                },
            },
        ),
        (
            "exec-reply",
            Msg::ExecReply {
                txn,
                results: (0..3)
                    .map(|i| {
                        (
                            i,
                            ExecResult::Done(OpReply {
                                value: Some(Value::from(4_000_000_000_000 + u64::from(i))),
                                tw: ts(3, 100),
                                tr: ts(17, 0),
                            }),
                        )
                    })
                    .collect(),
                ts_server: clk + 40,
                latest: clk + 39,
            },
        ),
        ("decide", Msg::Decide { txn, commit: true }),
        ("decide-ack", Msg::DecideAck { txn }),
    ]
}

/// Nanoseconds per encode and per decode of each message, and its size.
fn measure(encoding: Encoding, msgs: &[(&str, Msg)], rounds: u32) -> Vec<(f64, f64, usize)> {
    msgs.iter()
        .map(|(_, m)| {
            let mut out = Vec::with_capacity(256);
            let start = Instant::now();
            for _ in 0..rounds {
                out.clear();
                black_box(m).encode_as(encoding, &mut out);
                black_box(&out);
            }
            let encode = start.elapsed().as_nanos() as f64 / f64::from(rounds);
            let start = Instant::now();
            for _ in 0..rounds {
                let back = Msg::decode_as(encoding, black_box(&out)).expect("own encoding");
                black_box(back);
            }
            let decode = start.elapsed().as_nanos() as f64 / f64::from(rounds);
            // A measurement that decodes to something else measures nothing.
            assert_eq!(&Msg::decode_as(encoding, &out).expect("own encoding"), m);
            (encode, decode, out.len())
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(args: &BenchWireArgs) -> ExitCode {
    if args.rounds == 0 || args.runs == 0 {
        eprintln!("error: --rounds and --runs must be positive");
        return ExitCode::from(2);
    }
    let msgs = f1_messages();
    let encodings = [Encoding::Binary, Encoding::Resp];
    // [encoding][message] -> samples
    let mut samples = vec![vec![(Vec::new(), Vec::new(), 0); msgs.len()]; encodings.len()];
    for _ in 0..args.runs {
        for (e, &encoding) in encodings.iter().enumerate() {
            for (m, (enc, dec, len)) in measure(encoding, &msgs, args.rounds)
                .into_iter()
                .enumerate()
            {
                samples[e][m].0.push(enc);
                samples[e][m].1.push(dec);
                samples[e][m].2 = len;
            }
        }
    }
    println!(
        "verso bench wire: {} rounds x {} runs per encoding, interleaved; medians",
        args.rounds, args.runs
    );
    println!(
        "{:<12} {:>8} {:>8} {:>10} {:>10} {:>10} {:>10}",
        "message", "binary B", "resp B", "bin enc ns", "resp enc ns", "bin dec ns", "resp dec ns"
    );
    for (m, (name, _)) in msgs.iter().enumerate() {
        let b = &samples[0][m];
        let r = &samples[1][m];
        println!(
            "{:<12} {:>8} {:>8} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
            name,
            b.2,
            r.2,
            median(b.0.clone()),
            median(r.0.clone()),
            median(b.1.clone()),
            median(r.1.clone()),
        );
    }
    ExitCode::SUCCESS
}
