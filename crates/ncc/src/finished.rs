//! What a server knows of its clients' finished transactions: each client names, on its
//! requests, the sequence number below which every transaction of it is finished (decided,
//! and the decision acknowledged by every server it reached). A server forgets the records
//! below a client's mark and treats a message about a transaction below it that it has no
//! record of as a late duplicate. Shared by NCC's server and the baselines'.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::types::{ClientId, TxnId};

/// Per client, the sequence number below which it has finished every transaction.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct FinishedMarks(BTreeMap<ClientId, u64>);

impl FinishedMarks {
    /// Raises `client`'s mark to `done_below`; the transactions newly below it, if it rose
    /// (a message may be late and carry an older mark).
    fn raise(&mut self, client: ClientId, done_below: u64) -> Option<Range<TxnId>> {
        let mark = self.0.entry(client).or_insert(0);
        if done_below <= *mark {
            return None;
        }
        let from = TxnId { client, seq: *mark };
        *mark = done_below;
        Some(
            from..TxnId {
                client,
                seq: done_below,
            },
        )
    }

    /// Raises `client`'s mark to `done_below` and removes from `records` the transactions
    /// newly below it that `forgettable` allows (a server keeps one it still owes a
    /// decision). Returns the removed ones.
    pub(crate) fn forget<T>(
        &mut self,
        records: &mut BTreeMap<TxnId, T>,
        client: ClientId,
        done_below: u64,
        forgettable: impl Fn(&T) -> bool,
    ) -> Vec<TxnId> {
        let Some(range) = self.raise(client, done_below) else {
            return Vec::new();
        };
        let gone: Vec<TxnId> = records
            .range(range)
            .filter(|(_, t)| forgettable(t))
            .map(|(&id, _)| id)
            .collect();
        for txn in &gone {
            records.remove(txn);
        }
        gone
    }

    /// Whether `txn`'s client has said it finished it.
    pub(crate) fn finished(&self, txn: TxnId) -> bool {
        self.0.get(&txn.client).is_some_and(|&mark| txn.seq < mark)
    }

    /// Every client's range of finished transactions (for invariant checks).
    pub(crate) fn ranges(&self) -> impl Iterator<Item = Range<TxnId>> + '_ {
        self.0
            .iter()
            .map(|(&client, &mark)| TxnId { client, seq: 0 }..TxnId { client, seq: mark })
    }
}
