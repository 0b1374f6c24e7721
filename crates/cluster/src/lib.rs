//! `verso-cluster`: sharding as state machines free of I/O (issue 17, first part).
//!
//! * [`slot`]: Redis Cluster's 16,384 hash slots (CRC16 of the key or its `{hash tag}`), so
//!   cluster clients, which compute slots themselves, route to the right group.
//! * [`lazen`]: online slot moves between replica groups, after the thesis's Lazen (§4.4),
//!   made safe for real clients: the configuration group's [`lazen::Config`] and each data
//!   group's [`lazen::Group`] are fed messages, commits and ticks and return what to append
//!   and send (quinn-proto style; no sockets, no clocks).
//! * [`sim`]: a deterministic simulator of several groups, the configuration group and
//!   clients that follow redirects, under message loss, duplication and reordering,
//!   failovers and total crashes, checking that no slot is served by two groups at once,
//!   that nothing acknowledged is lost beyond a total crash's non-synchronous suffix, and
//!   that every move finishes once faults stop.
//!
//! What is abstract here, and why: by default each group is one logical state machine over
//! its log (what its Lazy VSR group agrees on), with records either synchronous (on a
//! majority's disks before they count; never lost) or lazy (lost in a total crash of the
//! group if no synchronous record follows them). The data of a group is a map folded from
//! its log. With [`sim::SimOptions::replicated`] each data group is three real
//! `verso_vsr` replicas instead, with the same state machines on the primary, as the real
//! system runs them behind `verso-vsr` groups and the engine.

pub mod lazen;
pub mod sim;
pub mod slot;

pub use slot::{key_slot, Slot, SlotSet, SLOTS};
