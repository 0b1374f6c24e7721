//! TATP's four tables (TATP benchmark description v1.0, §2) and a secondary index, as Verso
//! tables with order-preserving big-endian keys and fixed little row layouts.
//!
//! | table            | key                          | row                                  |
//! |------------------|------------------------------|--------------------------------------|
//! | subscriber       | s_id u32                     | sub_nbr 15, bit 2, hex 5, byte2 10, msc_location 4, vlr_location 4 (40 B) |
//! | sub_nbr_index    | sub_nbr (15 digits)          | s_id 4                               |
//! | access_info      | s_id u32, ai_type u8         | data1 1, data2 1, data3 3, data4 5   |
//! | special_facility | s_id u32, sf_type u8         | is_active 1, error_cntrl 1, data_a 1, data_b 5 |
//! | call_forwarding  | s_id u32, sf_type u8, start_time u8 | end_time 1, numberx 15        |
//!
//! The ten `bit_i` columns pack into 2 bytes and the ten `hex_i` nibbles into 5, as the
//! specification's column domains allow. `sub_nbr` is `s_id` as 15 zero-padded digits.

use verso_engine::{Db, Error, Table};

/// Table names.
pub const SUBSCRIBER: &str = "tatp.subscriber";
/// `sub_nbr -> s_id`, for the transactions that name a subscriber by number.
pub const SUB_NBR_INDEX: &str = "tatp.sub_nbr_index";
/// Access info rows.
pub const ACCESS_INFO: &str = "tatp.access_info";
/// Special facility rows.
pub const SPECIAL_FACILITY: &str = "tatp.special_facility";
/// Call forwarding rows.
pub const CALL_FORWARDING: &str = "tatp.call_forwarding";

/// The engine tables of a TATP database.
#[derive(Clone, Copy, Debug)]
pub struct Tables {
    pub subscriber: Table,
    pub sub_nbr_index: Table,
    pub access_info: Table,
    pub special_facility: Table,
    pub call_forwarding: Table,
}

impl Tables {
    /// Opens (creating) the tables.
    pub fn open(db: &Db) -> Result<Self, Error> {
        Ok(Tables {
            subscriber: db.table(SUBSCRIBER)?,
            sub_nbr_index: db.table(SUB_NBR_INDEX)?,
            access_info: db.table(ACCESS_INFO)?,
            special_facility: db.table(SPECIAL_FACILITY)?,
            call_forwarding: db.table(CALL_FORWARDING)?,
        })
    }
}

/// Bytes of a subscriber row.
pub const SUBSCRIBER_ROW: usize = 40;
/// Offsets in a subscriber row.
pub const SUB_NBR_AT: usize = 0;
/// The packed `bit_1..bit_10` (bit 0 = `bit_1`).
pub const BITS_AT: usize = 15;
/// `vlr_location` (the last 4 bytes).
pub const VLR_AT: usize = 36;
/// Bytes of an access-info row.
pub const ACCESS_ROW: usize = 10;
/// Bytes of a special-facility row.
pub const FACILITY_ROW: usize = 8;
/// Offsets in a special-facility row.
pub const IS_ACTIVE_AT: usize = 0;
/// `data_a`.
pub const DATA_A_AT: usize = 2;
/// Bytes of a call-forwarding row.
pub const FORWARDING_ROW: usize = 16;
/// `end_time`, first byte of a call-forwarding row.
pub const END_TIME_AT: usize = 0;

/// `sub_nbr` for `s_id`: 15 zero-padded decimal digits.
pub fn sub_nbr(s_id: u32) -> [u8; 15] {
    let mut out = [b'0'; 15];
    let mut n = s_id;
    for b in out.iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out
}

/// Subscriber key.
#[inline]
pub fn subscriber_key(s_id: u32) -> [u8; 4] {
    s_id.to_be_bytes()
}

/// Access-info and special-facility keys: `(s_id, type)`.
#[inline]
pub fn typed_key(s_id: u32, ty: u8) -> [u8; 5] {
    let s = s_id.to_be_bytes();
    [s[0], s[1], s[2], s[3], ty]
}

/// Call-forwarding key: `(s_id, sf_type, start_time)`.
#[inline]
pub fn forwarding_key(s_id: u32, sf_type: u8, start_time: u8) -> [u8; 6] {
    let s = s_id.to_be_bytes();
    [s[0], s[1], s[2], s[3], sf_type, start_time]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_like_their_columns() {
        assert!(forwarding_key(1, 4, 16) < forwarding_key(2, 1, 0));
        assert!(forwarding_key(7, 1, 16) < forwarding_key(7, 2, 0));
        assert!(typed_key(255, 4) < typed_key(256, 1));
        assert_eq!(&sub_nbr(1234), b"000000000001234");
        assert_eq!(&sub_nbr(0), b"000000000000000");
        assert!(sub_nbr(99) < sub_nbr(100));
    }
}
