//! TATP's seven transactions (benchmark description §3), each one engine transaction.
//!
//! A transaction the specification expects to fail for some inputs (a missing row, a
//! duplicate key) rolls back and returns `Ok(false)`: it still counts as a completed
//! transaction, as TATP counts it, and reports it as unsuccessful. Conflicts come back as
//! `Err` for the worker to retry.

use std::ops::Bound;

use verso_engine::{Db, Error, Txn};

use super::schema::{
    forwarding_key, subscriber_key, typed_key, Tables, BITS_AT, DATA_A_AT, END_TIME_AT,
    FORWARDING_ROW, IS_ACTIVE_AT, VLR_AT,
};

/// The transaction types in the standard mix, with their shares in percent (§4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnType {
    GetSubscriberData,
    GetNewDestination,
    GetAccessData,
    UpdateSubscriberData,
    UpdateLocation,
    InsertCallForwarding,
    DeleteCallForwarding,
}

impl TxnType {
    /// All of them, in the specification's order.
    pub const ALL: [TxnType; 7] = [
        TxnType::GetSubscriberData,
        TxnType::GetNewDestination,
        TxnType::GetAccessData,
        TxnType::UpdateSubscriberData,
        TxnType::UpdateLocation,
        TxnType::InsertCallForwarding,
        TxnType::DeleteCallForwarding,
    ];

    /// The standard mix: 80% read-only, 20% writes.
    pub const fn percent(self) -> u32 {
        match self {
            TxnType::GetSubscriberData | TxnType::GetAccessData => 35,
            TxnType::GetNewDestination => 10,
            TxnType::UpdateLocation => 14,
            TxnType::UpdateSubscriberData
            | TxnType::InsertCallForwarding
            | TxnType::DeleteCallForwarding => 2,
        }
    }

    /// Its name in reports.
    pub const fn name(self) -> &'static str {
        match self {
            TxnType::GetSubscriberData => "get_subscriber_data",
            TxnType::GetNewDestination => "get_new_destination",
            TxnType::GetAccessData => "get_access_data",
            TxnType::UpdateSubscriberData => "update_subscriber_data",
            TxnType::UpdateLocation => "update_location",
            TxnType::InsertCallForwarding => "insert_call_forwarding",
            TxnType::DeleteCallForwarding => "delete_call_forwarding",
        }
    }

    /// The type whose slice of `0..100` holds `roll`.
    #[inline]
    pub fn from_roll(roll: u32) -> Self {
        let mut acc = 0;
        for ty in Self::ALL {
            acc += ty.percent();
            if roll < acc {
                return ty;
            }
        }
        TxnType::DeleteCallForwarding
    }
}

const _: () = {
    let (mut sum, mut i) = (0, 0);
    while i < TxnType::ALL.len() {
        sum += TxnType::ALL[i].percent();
        i += 1;
    }
    assert!(sum == 100);
};

/// One transaction's inputs, drawn once (a conflict retries the same inputs).
#[derive(Clone, Copy, Debug)]
pub enum Input {
    GetSubscriberData {
        s_id: u32,
    },
    GetNewDestination {
        s_id: u32,
        sf_type: u8,
        start_time: u8,
        end_time: u8,
    },
    GetAccessData {
        s_id: u32,
        ai_type: u8,
    },
    UpdateSubscriberData {
        s_id: u32,
        sf_type: u8,
        bit_1: bool,
        data_a: u8,
    },
    UpdateLocation {
        sub_nbr: [u8; 15],
        vlr_location: u32,
    },
    InsertCallForwarding {
        sub_nbr: [u8; 15],
        sf_type: u8,
        start_time: u8,
        end_time: u8,
        numberx: [u8; 15],
    },
    DeleteCallForwarding {
        sub_nbr: [u8; 15],
        sf_type: u8,
        start_time: u8,
    },
}

/// Why an attempt did not complete.
#[derive(Debug)]
pub enum TxnError {
    /// From the engine: a conflict (retry) or a real error.
    Engine(Error),
    /// A row of the wrong size: the database is not what the loader wrote (a bug).
    Corrupt(&'static str),
}

impl From<Error> for TxnError {
    fn from(e: Error) -> Self {
        TxnError::Engine(e)
    }
}

/// Runs `input` once: `Ok(true)` committed, `Ok(false)` rolled back as TATP expects for
/// these inputs, `Err` on a conflict or engine error (the transaction is aborted).
pub fn run(db: &Db, t: &Tables, input: &Input, sink: &mut u64) -> Result<bool, TxnError> {
    match *input {
        Input::GetSubscriberData { s_id } => {
            let txn = db.begin_read_only()?;
            let found = txn.get(&t.subscriber, subscriber_key(s_id))?.map(|row| {
                // Every column: fold the row so none of it is skipped.
                row.iter()
                    .fold(0u64, |a, &b| a.rotate_left(5) ^ u64::from(b))
            });
            *sink ^= found.unwrap_or(0);
            crate::persist::commit(txn)?;
            Ok(found.is_some())
        }
        Input::GetNewDestination {
            s_id,
            sf_type,
            start_time,
            end_time,
        } => {
            let txn = db.begin_read_only()?;
            let active = txn
                .get(&t.special_facility, typed_key(s_id, sf_type))?
                .is_some_and(|row| row.get(IS_ACTIVE_AT) == Some(&1));
            let mut found = 0u32;
            if active {
                // cf.start_time <= :start_time AND :end_time < cf.end_time
                let lo = forwarding_key(s_id, sf_type, 0);
                let hi = forwarding_key(s_id, sf_type, start_time);
                for (_, row) in txn.range(
                    &t.call_forwarding,
                    (Bound::Included(&lo[..]), Bound::Included(&hi[..])),
                )? {
                    if row.len() != FORWARDING_ROW {
                        return Err(TxnError::Corrupt("a call_forwarding row of the wrong size"));
                    }
                    if end_time < row[END_TIME_AT] {
                        found += 1;
                        *sink ^= u64::from(row[FORWARDING_ROW - 1]);
                    }
                }
            }
            crate::persist::commit(txn)?;
            Ok(found > 0)
        }
        Input::GetAccessData { s_id, ai_type } => {
            let txn = db.begin_read_only()?;
            let found = txn
                .get(&t.access_info, typed_key(s_id, ai_type))?
                .map(|row| {
                    row.iter()
                        .fold(0u64, |a, &b| a.rotate_left(3) ^ u64::from(b))
                });
            *sink ^= found.unwrap_or(0);
            crate::persist::commit(txn)?;
            Ok(found.is_some())
        }
        Input::UpdateSubscriberData {
            s_id,
            sf_type,
            bit_1,
            data_a,
        } => {
            let mut txn = db.begin()?;
            let mut sub = [0u8; super::schema::SUBSCRIBER_ROW];
            if !copy_row(&txn, &t.subscriber, &subscriber_key(s_id), &mut sub)? {
                txn.abort();
                return Ok(false);
            }
            let bits = u16::from_le_bytes([sub[BITS_AT], sub[BITS_AT + 1]]);
            let bits = (bits & !1) | u16::from(bit_1);
            sub[BITS_AT..BITS_AT + 2].copy_from_slice(&bits.to_le_bytes());
            txn.put(&t.subscriber, subscriber_key(s_id), sub)?;
            let key = typed_key(s_id, sf_type);
            let mut sf = [0u8; super::schema::FACILITY_ROW];
            if !copy_row(&txn, &t.special_facility, &key, &mut sf)? {
                // No such facility: the whole transaction rolls back (§3.4).
                txn.abort();
                return Ok(false);
            }
            sf[DATA_A_AT] = data_a;
            txn.put(&t.special_facility, key, sf)?;
            crate::persist::commit(txn)?;
            Ok(true)
        }
        Input::UpdateLocation {
            sub_nbr,
            vlr_location,
        } => {
            let mut txn = db.begin()?;
            let Some(s_id) = lookup(&txn, t, &sub_nbr)? else {
                txn.abort();
                return Ok(false);
            };
            let mut sub = [0u8; super::schema::SUBSCRIBER_ROW];
            if !copy_row(&txn, &t.subscriber, &subscriber_key(s_id), &mut sub)? {
                txn.abort();
                return Ok(false);
            }
            sub[VLR_AT..VLR_AT + 4].copy_from_slice(&vlr_location.to_le_bytes());
            txn.put(&t.subscriber, subscriber_key(s_id), sub)?;
            crate::persist::commit(txn)?;
            Ok(true)
        }
        Input::InsertCallForwarding {
            sub_nbr,
            sf_type,
            start_time,
            end_time,
            numberx,
        } => {
            let mut txn = db.begin()?;
            let Some(s_id) = lookup(&txn, t, &sub_nbr)? else {
                txn.abort();
                return Ok(false);
            };
            // SELECT sf_type FROM special_facility WHERE s_id = ?
            let lo = typed_key(s_id, 0);
            let hi = typed_key(s_id, u8::MAX);
            let mut has_type = false;
            for (k, _) in txn.range(
                &t.special_facility,
                (Bound::Included(&lo[..]), Bound::Included(&hi[..])),
            )? {
                has_type |= k[4] == sf_type;
            }
            let key = forwarding_key(s_id, sf_type, start_time);
            // The foreign key must exist and the primary key must not (§3.6).
            if !has_type || txn.get(&t.call_forwarding, key)?.is_some() {
                txn.abort();
                return Ok(false);
            }
            let mut row = [0u8; FORWARDING_ROW];
            row[END_TIME_AT] = end_time;
            row[1..].copy_from_slice(&numberx);
            txn.put(&t.call_forwarding, key, row)?;
            crate::persist::commit(txn)?;
            Ok(true)
        }
        Input::DeleteCallForwarding {
            sub_nbr,
            sf_type,
            start_time,
        } => {
            let mut txn = db.begin()?;
            let Some(s_id) = lookup(&txn, t, &sub_nbr)? else {
                txn.abort();
                return Ok(false);
            };
            let key = forwarding_key(s_id, sf_type, start_time);
            if txn.get(&t.call_forwarding, key)?.is_none() {
                txn.abort();
                return Ok(false);
            }
            txn.delete(&t.call_forwarding, key)?;
            crate::persist::commit(txn)?;
            Ok(true)
        }
    }
}

/// `SELECT s_id FROM subscriber WHERE sub_nbr = ?`, through the index table.
fn lookup(txn: &Txn<'_>, t: &Tables, sub_nbr: &[u8; 15]) -> Result<Option<u32>, Error> {
    Ok(txn
        .get(&t.sub_nbr_index, sub_nbr)?
        .and_then(|v| v.try_into().ok())
        .map(u32::from_le_bytes))
}

/// Copies the row under `key` into `out` (a row of exactly that size): `false` if absent.
fn copy_row(
    txn: &Txn<'_>,
    table: &verso_engine::Table,
    key: &[u8],
    out: &mut [u8],
) -> Result<bool, TxnError> {
    match txn.get(table, key)? {
        Some(row) if row.len() == out.len() => {
            out.copy_from_slice(row);
            Ok(true)
        }
        Some(_) => Err(TxnError::Corrupt("a row of the wrong size")),
        None => Ok(false),
    }
}
