//! Response timing control (Alg 5.3) and the reads run again when the write they read
//! aborts.

use super::*;

impl<S: Store> Server<S> {
    /// Response timing control on `key`'s queue (Alg 5.3): drop the decided requests at its
    /// head, then answer the first undecided one, and the reads right after it if it is a
    /// read (stepping over decided requests: an aborted write between two reads must not
    /// hold the second back, or two transactions can wait on each other for ever; the
    /// simulator found that one with two-shot transactions). (The reads of an aborted write were run again when it aborted:
    /// [`Server::rerun_reads_of`].)
    pub(super) fn timing_control(&mut self, key: &Key) {
        let Some(ks) = self.keys.get_mut(key) else {
            return;
        };
        while ks
            .queue
            .front()
            .is_some_and(|head| head.status != Status::Undecided)
        {
            ks.queue.pop_front();
        }
        let mut release = Vec::new();
        let everything = self.mistakes.no_timing_control;
        // The undecided requests seen so far (ahead of the one looked at), as (transaction,
        // is a write). A request waits only for *other* transactions' requests: a write for
        // any of them (D2, D3), a read for their writes (D1). A transaction's own read ahead
        // of its write (a read-modify-write) holds nothing back.
        let mut ahead: Vec<(TxnId, bool)> = Vec::new();
        for item in ks.queue.iter_mut() {
            if item.status != Status::Undecided {
                // Decided requests behind the head hold nothing back: only an aborted one
                // can be there (a write's answer leaves only once all ahead are decided,
                // so it cannot have committed), and its readers have run again already.
                continue;
            }
            let write = item.op.is_write();
            let blocked = ahead.iter().any(|&(t, w)| t != item.txn && (write || w));
            if (everything || !blocked) && !item.sent {
                item.sent = true;
                release.push((item.txn, item.index, item.reply.clone()));
            }
            if ahead.iter().any(|&(t, w)| t != item.txn && w) && !everything {
                break; // behind another's undecided write nothing more leaves
            }
            ahead.push((item.txn, write));
        }
        for (txn, index, reply) in release {
            self.answer(txn, index, ExecResult::Done(reply));
        }
    }

    /// The version `gone` of `key` was aborted: the read-write reads that saw it run again
    /// at their own timestamps and queue at the tail (their answers were held: D1), the
    /// paper's re-execution in Alg 5.3. Wherever they are in the queue: an aborted write
    /// need not be directly ahead of its readers (another aborted write may sit between).
    /// A read that would then wait behind an undecided write with a higher timestamp
    /// aborts early, as on arrival (else two transactions can each wait for the other).
    pub(super) fn rerun_reads_of(&mut self, key: &Key, gone: u64) {
        let Some(ks) = self.keys.get_mut(key) else {
            return;
        };
        let (again, kept): (VecDeque<Item>, VecDeque<Item>) = std::mem::take(&mut ks.queue)
            .into_iter()
            .partition(|i| !i.op.is_write() && i.version == gone && i.status == Status::Undecided);
        ks.queue = kept;
        let mut early = Vec::new();
        for mut read in again {
            let behind_higher = ks.queue.iter().any(|i| {
                i.txn != read.txn
                    && i.status == Status::Undecided
                    && i.op.is_write()
                    && i.ts > read.ts
            });
            if behind_higher && !self.mistakes.no_early_abort {
                early.push((read.txn, read.index));
                continue;
            }
            let curr = ks.versions.last_mut().expect("a key has a version");
            curr.tr = curr.tr.max(read.ts);
            curr.read = true;
            read.reply = OpReply {
                value: Some(curr.value.clone()),
                tw: curr.tw,
                tr: curr.tr,
            };
            read.version = curr.id;
            read.sent = false;
            if let Some(t) = self.txns.get_mut(&read.txn) {
                t.versions[read.index as usize] = Some(read.version);
                t.answered[read.index as usize] = None;
            }
            ks.queue.push_back(read);
        }
        for (txn, index) in early {
            self.answer(txn, index, ExecResult::EarlyAbort);
        }
    }

    /// The version below `above` on `key` was aborted: if `above` was written by a
    /// read-write, what it read is gone, and it reads the version now below it instead
    /// (its answer is still held: a write waits for the undecided write before it, D3).
    pub(super) fn reread_below(&mut self, key: &Key, above: u64) {
        let Some(ks) = self.keys.get_mut(key) else {
            return;
        };
        let Some(i) = ks.versions.iter().position(|x| x.id == above) else {
            return;
        };
        let below = &ks.versions[i - 1];
        let (value, below_writer) = (below.value.clone(), below.writer);
        let everything = self.mistakes.no_timing_control;
        for item in ks.queue.iter_mut() {
            let fresh = item.version == above && item.status == Status::Undecided;
            if fresh && matches!(item.op, Op::ReadWrite(..)) {
                debug_assert!(
                    !item.sent || everything,
                    "a read-write's answer waits for the write below"
                );
                item.reply.value = Some(value.clone());
                if below_writer != Some(item.txn) {
                    ks.versions[i - 1].read = true;
                }
            }
        }
    }
}
