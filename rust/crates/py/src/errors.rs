//! Rust errors → the one Python error hierarchy in `seqbus/errors.py`.

use pyo3::prelude::*;
use seqbus_net::{ConfigError, Error, SendError};

/// An instance of `seqbus.errors.<class>(*args)` as a `PyErr`.
pub fn seqbus_error<'py, A>(py: Python<'py>, class: &str, args: A) -> PyErr
where
    A: pyo3::call::PyCallArgs<'py>,
{
    let made = py
        .import("seqbus.errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call1(args));
    match made {
        Ok(value) => PyErr::from_value(value),
        Err(err) => err,
    }
}

/// `DecodeError(message, field, offset, detail)`.
pub fn decode_error(
    py: Python<'_>,
    message: &str,
    field: &str,
    offset: usize,
    detail: String,
) -> PyErr {
    seqbus_error(py, "DecodeError", (message, field, offset, detail))
}

pub fn config_error(py: Python<'_>, e: &ConfigError) -> PyErr {
    seqbus_error(py, "ConfigError", (e.to_string(),))
}

/// The Python error for an error of the bus.
pub fn net_error(py: Python<'_>, e: Error) -> PyErr {
    let text = e.to_string();
    match e {
        Error::Config(c) => config_error(py, &c),
        Error::Option { .. } => seqbus_error(py, "ConfigError", (text,)),
        Error::Journal(_) | Error::Store(_) | Error::Persist(_) => {
            seqbus_error(py, "JournalError", (text,))
        }
        Error::Io { .. } => seqbus_error(py, "TransportError", (text,)),
        Error::Gap { .. } => seqbus_error(py, "GapError", (text,)),
        Error::SessionEnded(last) => seqbus_error(py, "SessionEndedError", (text, last)),
    }
}

/// The Python error for a refused command.
pub fn send_error(py: Python<'_>, e: SendError) -> PyErr {
    let text = e.to_string();
    match e {
        SendError::WindowFull { .. } | SendError::NotReady => {
            seqbus_error(py, "BackPressureError", (text,))
        }
        SendError::TooLarge { .. } => seqbus_error(py, "MessageTooLargeError", (text,)),
    }
}
