//! `seqbus._core`: the Python binding of the seqbus Rust core. It only converts values and
//! releases the GIL around blocking calls; the behaviour lives in the core crates (what a
//! node is handed: `seqbus_core::delivery`).

use pyo3::prelude::*;

mod aio;
mod archive;
mod batch;
mod client;
mod delivery;
mod errors;
mod journal;
mod logs;
mod sim;

use seqbus_core::delivery as core_delivery;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    logs::install(m.py())?;
    m.add_function(wrap_pyfunction!(logs::log_to_python, m)?)?;
    m.add_class::<batch::PyClock>()?;
    m.add_class::<client::NodeClient>()?;
    m.add_class::<aio::LoopClient>()?;
    m.add_class::<client::Sequencer>()?;
    m.add_class::<client::Replayer>()?;
    m.add_class::<client::Dispatcher>()?;
    m.add_class::<client::Bridge>()?;
    m.add_class::<sim::SimBus>()?;
    m.add_class::<delivery::PyDelivery>()?;
    m.add_function(wrap_pyfunction!(client::check_config, m)?)?;
    m.add_function(wrap_pyfunction!(client::status_endpoints, m)?)?;
    m.add_function(wrap_pyfunction!(client::error_policy, m)?)?;
    m.add_function(wrap_pyfunction!(journal::verify_journal, m)?)?;
    m.add_function(wrap_pyfunction!(journal::repair_journal, m)?)?;
    m.add_function(wrap_pyfunction!(batch::walk_batch, m)?)?;
    m.add("TIME_GRID_NS", core_delivery::TIME_GRID_NS)?;
    m.add("BUS_SCHEMA_ID", core_delivery::BUS_SCHEMA_ID)?;
    m.add(
        "ADMIN_COMMAND_TEMPLATE_ID",
        core_delivery::ADMIN_COMMAND_TEMPLATE_ID,
    )?;
    m.add(
        "ADMIN_REPLY_TEMPLATE_ID",
        core_delivery::ADMIN_REPLY_TEMPLATE_ID,
    )?;
    m.add("RECORD_MESSAGE", core_delivery::RECORD_MESSAGE)?;
    m.add("RECORD_CAUGHT_UP", core_delivery::RECORD_CAUGHT_UP)?;
    m.add("RECORD_TIME", core_delivery::RECORD_TIME)?;
    m.add("RECORD_HEADER_LEN", core_delivery::RECORD_HEADER_LEN)?;
    m.add("STOP_END", batch::STOP_END)?;
    m.add("STOP_RECORD", batch::STOP_RECORD)?;
    m.add("STOP_TIMER", batch::STOP_TIMER)?;
    m.add("STOP_UNKNOWN", batch::STOP_UNKNOWN)?;
    m.add("STOP_SKIP", batch::STOP_SKIP)?;
    m.add("STOP_ERROR", batch::STOP_ERROR)?;
    archive::register(m)?;
    Ok(())
}
