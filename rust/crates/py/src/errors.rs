//! Rust errors → the one Python error hierarchy in `seqbus/errors.py`.

use pyo3::prelude::*;

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
pub fn decode_error(py: Python<'_>, message: &str, field: &str, offset: usize, detail: String) -> PyErr {
    seqbus_error(py, "DecodeError", (message, field, offset, detail))
}
