//! The handshake: both ends prove they hold the cluster's secret before any Data frame counts.
//!
//! ```text
//! connector -> acceptor  Hello     | version: u16 LE | from: u8 | to: u8 | nonce_c: 32 bytes |
//! acceptor -> connector  Challenge | nonce_s: 32 bytes | mac_s: 32 bytes |
//! connector -> acceptor  Proof     | mac_c: 32 bytes |
//!
//! mac_s = HMAC-SHA256(secret, "verso-vsr acceptor"  | version | from | to | nonce_c | nonce_s)
//! mac_c = HMAC-SHA256(secret, "verso-vsr connector" | version | from | to | nonce_s | nonce_c)
//! ```
//!
//! Why it is built this way:
//! - Each side MACs the other's fresh nonce, so a recorded handshake cannot be replayed.
//! - The two labels differ, so an acceptor's MAC (which a stranger can obtain for any nonce it
//!   likes) is never a valid connector proof: the handshake cannot be reflected back.
//! - `from` and `to` are under both MACs, so a proof for one ordered pair of replicas is useless
//!   for another. Every field after the label has a fixed width, so the input is unambiguous.
//! - MACs are compared in constant time (`verify_slice`).
//!
//! The acceptor refuses an unknown `from`, a `to` that is not itself or another version right
//! after Hello, before spending a nonce: none of that is secret, and a stranger learns nothing
//! from it that a configuration file would not tell it.
//!
//! Boundary: after the handshake, frames are checksummed but not MACed, so this authenticates
//! replicas to each other, not against an attacker on the network path (use a private network).

use std::time::Instant;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::conn::{ConnError, Link, Shared};
use super::frame::FrameKind;
use super::ReplicaId;

/// The wire protocol this build speaks; a peer with another is refused with a log line.
/// Version 2: the restarted replica's `Recovering` messages, and `ElectPrepare` saying
/// whether the candidate restarted (`verso_vsr` `replica::recovery`). Version 3: read
/// leases (PREPARE, HEARTBEAT and PREPAREOK carry them: `verso_vsr` `replica::lease`).
/// Version 4: every payload is a `state_transfer::Payload` (a VSR message, or a chunk of
/// a state transfer's data). Version 5: `CatchUpReply` says whether more follows (replies
/// are cut by bytes). Version 6: a message too large for one payload goes in parts
/// (`state_transfer::MessagePart`).
pub const PROTOCOL_VERSION: u16 = 6;
const NONCE_LEN: usize = 32;
const MAC_LEN: usize = 32;
const HELLO_LEN: usize = 2 + 1 + 1 + NONCE_LEN;
const CHALLENGE_LEN: usize = NONCE_LEN + MAC_LEN;
const PROOF_LEN: usize = MAC_LEN;
/// Largest frame accepted before the handshake completes, so a stranger cannot make an
/// acceptor buffer more than this.
pub(super) const HANDSHAKE_PAYLOAD_MAX: u32 = 64;

const _: () = assert!(HELLO_LEN <= HANDSHAKE_PAYLOAD_MAX as usize);
const _: () = assert!(CHALLENGE_LEN <= HANDSHAKE_PAYLOAD_MAX as usize);
const _: () = assert!(PROOF_LEN <= HANDSHAKE_PAYLOAD_MAX as usize);

const ACCEPTOR_LABEL: &[u8] = b"verso-vsr acceptor";
const CONNECTOR_LABEL: &[u8] = b"verso-vsr connector";

type Nonce = [u8; NONCE_LEN];
type Tag = [u8; MAC_LEN];

/// Handshake step 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Hello {
    pub version: u16,
    pub from: ReplicaId,
    pub to: ReplicaId,
    pub nonce: Nonce,
}

impl Hello {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HELLO_LEN);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&[self.from, self.to]);
        out.extend_from_slice(&self.nonce);
        assert_eq!(out.len(), HELLO_LEN);
        out
    }

    fn decode(bytes: &[u8]) -> Option<Hello> {
        let (&[v0, v1, from, to], nonce) = bytes.split_first_chunk::<4>()?;
        Some(Hello {
            version: u16::from_le_bytes([v0, v1]),
            from,
            to,
            nonce: nonce.try_into().ok()?,
        })
    }
}

/// The keyed MAC; each computation starts from a clone, so the key schedule runs once.
#[derive(Clone)]
pub(super) struct Authenticator {
    keyed: Hmac<Sha256>,
}

impl Authenticator {
    pub fn new(secret: &[u8]) -> Option<Authenticator> {
        // HMAC takes keys of any length, so this never fails; the caller still handles it.
        let keyed = <Hmac<Sha256> as Mac>::new_from_slice(secret).ok()?;
        Some(Authenticator { keyed })
    }

    fn mac(&self, label: &[u8], hello: &Hello, first: &Nonce, second: &Nonce) -> Hmac<Sha256> {
        let mut mac = self.keyed.clone();
        mac.update(label);
        mac.update(&hello.version.to_le_bytes());
        mac.update(&[hello.from, hello.to]);
        mac.update(first);
        mac.update(second);
        mac
    }

    pub fn acceptor_mac(&self, hello: &Hello, nonce_s: &Nonce) -> Tag {
        let mac = self.mac(ACCEPTOR_LABEL, hello, &hello.nonce, nonce_s);
        mac.finalize().into_bytes().into()
    }

    pub fn verify_acceptor(&self, hello: &Hello, nonce_s: &Nonce, tag: &[u8]) -> bool {
        let mac = self.mac(ACCEPTOR_LABEL, hello, &hello.nonce, nonce_s);
        mac.verify_slice(tag).is_ok()
    }

    pub fn connector_mac(&self, hello: &Hello, nonce_s: &Nonce) -> Tag {
        let mac = self.mac(CONNECTOR_LABEL, hello, nonce_s, &hello.nonce);
        mac.finalize().into_bytes().into()
    }

    pub fn verify_connector(&self, hello: &Hello, nonce_s: &Nonce, tag: &[u8]) -> bool {
        let mac = self.mac(CONNECTOR_LABEL, hello, nonce_s, &hello.nonce);
        mac.verify_slice(tag).is_ok()
    }
}

fn nonce() -> Result<Nonce, ConnError> {
    let mut nonce = [0; NONCE_LEN];
    getrandom::getrandom(&mut nonce).map_err(ConnError::Random)?;
    Ok(nonce)
}

/// Reads the next handshake frame, which must be `kind`.
fn expect(
    link: &mut Link,
    shared: &Shared,
    kind: FrameKind,
    deadline: Instant,
) -> Result<Vec<u8>, ConnError> {
    let frame = link.read_frame(shared, HANDSHAKE_PAYLOAD_MAX, Some(deadline))?;
    if frame.kind != kind {
        return Err(ConnError::Unexpected {
            expected: kind,
            got: frame.kind,
        });
    }
    Ok(frame.payload)
}

/// The connector's side, on a fresh outgoing connection to `to`. On success the connection
/// may carry Data frames.
pub(super) fn connect(link: &mut Link, shared: &Shared, to: ReplicaId) -> Result<(), ConnError> {
    let deadline = Instant::now() + shared.config.handshake_timeout;
    let hello = Hello {
        version: PROTOCOL_VERSION,
        from: shared.config.me,
        to,
        nonce: nonce()?,
    };
    link.write_frame(FrameKind::Hello, &hello.encode())?;

    let challenge = expect(link, shared, FrameKind::Challenge, deadline)?;
    let Some((nonce_s, mac_s)) = challenge.split_first_chunk::<NONCE_LEN>() else {
        return Err(ConnError::Malformed("challenge"));
    };
    if mac_s.len() != MAC_LEN {
        return Err(ConnError::Malformed("challenge"));
    }
    if !shared.auth.verify_acceptor(&hello, nonce_s, mac_s) {
        return Err(ConnError::BadMac);
    }

    let proof = shared.auth.connector_mac(&hello, nonce_s);
    link.write_frame(FrameKind::Proof, &proof)
}

/// The acceptor's side, on a fresh incoming connection: the authenticated peer's id.
pub(super) fn accept(link: &mut Link, shared: &Shared) -> Result<ReplicaId, ConnError> {
    let deadline = Instant::now() + shared.config.handshake_timeout;
    let payload = expect(link, shared, FrameKind::Hello, deadline)?;
    let hello = Hello::decode(&payload).ok_or(ConnError::Malformed("hello"))?;
    if hello.version != PROTOCOL_VERSION {
        return Err(ConnError::Version {
            theirs: hello.version,
        });
    }
    if hello.to != shared.config.me || shared.peer(hello.from).is_none() {
        return Err(ConnError::UnknownReplica {
            from: hello.from,
            to: hello.to,
        });
    }

    let nonce_s = nonce()?;
    let mut challenge = Vec::with_capacity(CHALLENGE_LEN);
    challenge.extend_from_slice(&nonce_s);
    challenge.extend_from_slice(&shared.auth.acceptor_mac(&hello, &nonce_s));
    link.write_frame(FrameKind::Challenge, &challenge)?;

    let proof = expect(link, shared, FrameKind::Proof, deadline)?;
    if proof.len() != PROOF_LEN {
        return Err(ConnError::Malformed("proof"));
    }
    if !shared.auth.verify_connector(&hello, &nonce_s, &proof) {
        return Err(ConnError::BadMac);
    }
    Ok(hello.from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            version: PROTOCOL_VERSION,
            from: 1,
            to: 2,
            nonce: [7; NONCE_LEN],
        }
    }

    #[test]
    fn hello_roundtrips_and_wrong_lengths_are_refused() {
        let bytes = hello().encode();
        assert_eq!(Hello::decode(&bytes), Some(hello()));
        assert_eq!(Hello::decode(&bytes[..HELLO_LEN - 1]), None);
        assert_eq!(Hello::decode(&[bytes.clone(), vec![0]].concat()), None);
        assert_eq!(Hello::decode(&[]), None);
    }

    #[test]
    fn same_secret_verifies_other_secret_does_not() {
        let a = Authenticator::new(b"0123456789abcdef").unwrap();
        let b = Authenticator::new(b"0123456789abcdeX").unwrap();
        let nonce_s = [9; NONCE_LEN];
        let mac_s = a.acceptor_mac(&hello(), &nonce_s);
        let mac_c = a.connector_mac(&hello(), &nonce_s);
        assert!(a.verify_acceptor(&hello(), &nonce_s, &mac_s));
        assert!(a.verify_connector(&hello(), &nonce_s, &mac_c));
        assert!(!b.verify_acceptor(&hello(), &nonce_s, &mac_s));
        assert!(!b.verify_connector(&hello(), &nonce_s, &mac_c));
        assert!(!a.verify_connector(&hello(), &nonce_s, &mac_c[..31]));
    }

    #[test]
    fn an_acceptor_mac_is_not_a_proof_and_binds_the_pair() {
        let a = Authenticator::new(b"0123456789abcdef").unwrap();
        let nonce_s = [9; NONCE_LEN];
        // Reflection: a stranger gets mac_s for nonces of its choosing; it must not pass as
        // mac_c even with the nonces swapped.
        let reflected = Hello {
            nonce: nonce_s,
            ..hello()
        };
        let mac_s = a.acceptor_mac(&reflected, &hello().nonce);
        assert!(!a.verify_connector(&hello(), &nonce_s, &mac_s));
        let other_pair = Hello { from: 3, ..hello() };
        let mac_c = a.connector_mac(&hello(), &nonce_s);
        assert!(!a.verify_connector(&other_pair, &nonce_s, &mac_c));
    }
}
