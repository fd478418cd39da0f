//! Bodies of the bus's control messages (`schemas/bus.idl`, schema 1), byte-identical to
//! what seqc's codecs write: the 8-byte IDL message header, the fixed block (little-endian,
//! fields in declaration order, no padding; `char[N]` NUL padded), then the group and
//! variable-length field counts (one byte each, zero here). A test checks the bytes against
//! the generated `seqbus-codecs`.

use crate::envelope::{MessageHeader, MESSAGE_HEADER_LEN};
use crate::{le_u16, le_u64, need, Account, Session, WireError};

/// Schema id of `bus.idl`.
pub const BUS_SCHEMA_ID: u16 = 1;
/// Schema version of `bus.idl`.
pub const BUS_SCHEMA_VERSION: u16 = 2;
/// Template ids.
pub const CLOCK_TICK: u16 = 1;
pub const SESSION_START: u16 = 2;
pub const SENDER_STATE: u16 = 3;
pub const EPOCH: u16 = 6;

/// A decoded control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Put into the stream by an idle sequencer so that time advances.
    ClockTick,
    /// First message of a session.
    SessionStart { session: Session },
    /// The next command sequence the sequencer expects from an account (answer to hello).
    SenderState {
        next_command_seq: u64,
        account: Account,
        instance: u16,
        /// The leader's term and member id (0, 0 without a cluster; absent in version 1).
        term: u64,
        leader: u16,
    },
    /// A cluster leader's first message of its term (docs/ha.md).
    Epoch {
        term: u64,
        leader: u16,
        previous_leader: u16,
    },
}

fn header(template_id: u16, block_length: u16) -> [u8; MESSAGE_HEADER_LEN] {
    MessageHeader {
        block_length,
        template_id,
        schema_id: BUS_SCHEMA_ID,
        version: BUS_SCHEMA_VERSION,
    }
    .encode()
}

impl Control {
    /// Encodes the body (message header + block).
    pub fn encode(&self) -> Vec<u8> {
        match *self {
            Control::ClockTick => {
                let mut b = header(CLOCK_TICK, 0).to_vec();
                b.extend_from_slice(&[0, 0]);
                b
            }
            Control::SessionStart { session } => {
                let mut b = header(SESSION_START, 10).to_vec();
                b.extend(session.0.iter().map(|&c| if c == b' ' { 0 } else { c }));
                b.extend_from_slice(&[0, 0]);
                b
            }
            Control::SenderState {
                next_command_seq,
                account,
                instance,
                term,
                leader,
            } => {
                let mut b = header(SENDER_STATE, 28).to_vec();
                b.extend_from_slice(&next_command_seq.to_le_bytes());
                b.extend_from_slice(&account);
                b.extend_from_slice(&instance.to_le_bytes());
                b.extend_from_slice(&term.to_le_bytes());
                b.extend_from_slice(&leader.to_le_bytes());
                b.extend_from_slice(&[0, 0]);
                b
            }
            Control::Epoch {
                term,
                leader,
                previous_leader,
            } => {
                let mut b = header(EPOCH, 12).to_vec();
                b.extend_from_slice(&term.to_le_bytes());
                b.extend_from_slice(&leader.to_le_bytes());
                b.extend_from_slice(&previous_leader.to_le_bytes());
                b.extend_from_slice(&[0, 0]);
                b
            }
        }
    }

    /// Decodes a control body; schema-evolution aware (a longer block is accepted).
    pub fn parse(body: &[u8]) -> Result<Control, WireError> {
        const WHAT: &str = "control message";
        let h = MessageHeader::parse(body)?;
        if h.schema_id != BUS_SCHEMA_ID {
            return Err(WireError::Invalid {
                what: WHAT,
                field: "schema_id",
                value: h.schema_id as u64,
            });
        }
        let block = MESSAGE_HEADER_LEN;
        let need_block = |n: usize| -> Result<(), WireError> {
            if (h.block_length as usize) < n {
                return Err(WireError::Invalid {
                    what: WHAT,
                    field: "block_length",
                    value: h.block_length as u64,
                });
            }
            // the block, then the group and variable-length field counts
            need(WHAT, body, block, h.block_length as usize + 2)
        };
        match h.template_id {
            CLOCK_TICK => {
                need_block(0)?;
                Ok(Control::ClockTick)
            }
            SESSION_START => {
                need_block(10)?;
                let mut s = [b' '; 10];
                for (d, &c) in s.iter_mut().zip(&body[block..block + 10]) {
                    if c != 0 {
                        *d = c;
                    }
                }
                Ok(Control::SessionStart {
                    session: Session(s),
                })
            }
            SENDER_STATE => {
                need_block(18)?;
                // version 2 appended term and leader; a version-1 block reads them as 0
                let (term, leader) = if h.block_length >= 28 {
                    (le_u64(body, block + 18), le_u16(body, block + 26))
                } else {
                    (0, 0)
                };
                Ok(Control::SenderState {
                    next_command_seq: le_u64(body, block),
                    account: body[block + 8..block + 16].try_into().expect("8"),
                    instance: le_u16(body, block + 16),
                    term,
                    leader,
                })
            }
            EPOCH => {
                need_block(12)?;
                Ok(Control::Epoch {
                    term: le_u64(body, block),
                    leader: le_u16(body, block + 8),
                    previous_leader: le_u16(body, block + 10),
                })
            }
            t => Err(WireError::Invalid {
                what: WHAT,
                field: "template_id",
                value: t as u64,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for c in [
            Control::ClockTick,
            Control::SessionStart {
                session: Session::new("ABC").unwrap(),
            },
            Control::SenderState {
                next_command_seq: 77,
                account: crate::account("ME").unwrap(),
                instance: 2,
                term: 9,
                leader: 3,
            },
            Control::Epoch {
                term: 4,
                leader: 2,
                previous_leader: 1,
            },
        ] {
            assert_eq!(Control::parse(&c.encode()).unwrap(), c);
        }
        assert!(Control::parse(&[0; 4]).is_err());
        let tick = Control::ClockTick.encode();
        assert!(Control::parse(&tick[..tick.len() - 1]).is_err());
        let mut bad = Control::ClockTick.encode();
        bad[2] = 99;
        assert!(Control::parse(&bad).is_err());
    }
}

#[cfg(test)]
mod generated_codecs {
    //! The bytes match seqc's generated Rust codecs of `schemas/bus.idl`.
    use super::*;
    use seqbus_codecs::bus;

    #[test]
    fn same_bytes_as_seqc() {
        assert_eq!(
            Control::ClockTick.encode(),
            bus::ClockTick {}.encode().unwrap()
        );
        let s = Control::SessionStart {
            session: Session::new("TEST").unwrap(),
        };
        let g = bus::SessionStart {
            session: "TEST".into(),
        };
        assert_eq!(s.encode(), g.encode().unwrap());
        assert_eq!(bus::SessionStart::decode(&s.encode()).unwrap(), g);
        let s = Control::SenderState {
            next_command_seq: 5,
            account: crate::account("ME").unwrap(),
            instance: 2,
            term: 7,
            leader: 3,
        };
        let g = bus::SenderState {
            next_command_seq: 5,
            account: "ME".into(),
            instance: 2,
            term: 7,
            leader: 3,
        };
        assert_eq!(s.encode(), g.encode().unwrap());
        let e = Control::Epoch {
            term: 4,
            leader: 2,
            previous_leader: 1,
        };
        let g = bus::Epoch {
            term: 4,
            leader: 2,
            previous_leader: 1,
        };
        assert_eq!(e.encode(), g.encode().unwrap());
    }

    #[test]
    fn a_version_1_sender_state_reads_with_no_leader() {
        let mut v1 = header(SENDER_STATE, 18).to_vec();
        v1[6..8].copy_from_slice(&1u16.to_le_bytes());
        v1.extend_from_slice(&5u64.to_le_bytes());
        v1.extend_from_slice(b"ME\0\0\0\0\0\0");
        v1.extend_from_slice(&2u16.to_le_bytes());
        v1.extend_from_slice(&[0, 0]);
        assert_eq!(
            Control::parse(&v1).unwrap(),
            Control::SenderState {
                next_command_seq: 5,
                account: crate::account("ME").unwrap(),
                instance: 2,
                term: 0,
                leader: 0,
            }
        );
    }
}
