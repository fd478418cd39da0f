//! seqbus-spark: the native half of the seqbus Spark source.
//!
//! The source itself is a JVM DataSource V2 (`java/seqbus/spark/`, built into
//! `seqbus-spark.jar` by `make setup`): Spark plans, prunes columns and pushes filters in the
//! JVM, and executors decode through this library — the archive reader and decoders of
//! `seqbus-archive`, into column buffers that `NativeColumnVector` reads in place (no copy, no
//! Python worker, no Arrow IPC). Every function here converts its arguments, does the work
//! in [`table`], [`remote`] or `seqbus-archive`, and turns errors and panics into a
//! `seqbus.spark.SeqbusException`.
//!
//! Handles (archive readers, decoders, batches, remote readers, followers) are boxed and
//! passed to the JVM as `long`s; the JVM frees each exactly once.

pub mod remote;
pub mod schema;
pub mod table;

use std::borrow::Cow;
use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::Duration;

use jni::objects::{JBooleanArray, JClass, JLongArray, JString};
use jni::sys::{jint, jlong, jlongArray, jstring};
use jni::JNIEnv;

use seqbus_archive::reader::{Mode, Msg, Reassembler, Step};
use seqbus_archive::verify::verify_archive;
use seqbus_archive::{ArchiveReader, Problem};

use crate::remote::{Follower, Login, Remote};
use crate::table::{Batch, Catalog, Decoder};

const EXCEPTION: &str = "seqbus/spark/SeqbusException";

/// Runs `f`, turning an error or a panic into a pending `SeqbusException` (and `fallback`).
fn guard<'l, T>(
    env: &mut JNIEnv<'l>,
    fallback: T,
    f: impl FnOnce(&mut JNIEnv<'l>) -> Result<T, String>,
) -> T {
    let r = catch_unwind(AssertUnwindSafe(|| f(env)));
    let msg = match r {
        Ok(Ok(v)) => return v,
        Ok(Err(m)) => m,
        Err(p) => format!(
            "panic in seqbus-spark: {}",
            p.downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| p.downcast_ref::<&str>().copied())
                .unwrap_or("?")
        ),
    };
    if !env.exception_check().unwrap_or(false) {
        let _ = env.throw_new(EXCEPTION, msg);
    }
    fallback
}

fn string(env: &mut JNIEnv<'_>, s: &JString<'_>) -> Result<String, String> {
    if s.is_null() {
        return Ok(String::new());
    }
    env.get_string(s).map(Into::into).map_err(|e| e.to_string())
}

fn jstr(env: &mut JNIEnv<'_>, s: &str) -> Result<jstring, String> {
    env.new_string(s)
        .map(|s| s.into_raw())
        .map_err(|e| e.to_string())
}

fn longs(env: &mut JNIEnv<'_>, v: &[i64]) -> Result<jlongArray, String> {
    let a = env
        .new_long_array(v.len() as i32)
        .map_err(|e| e.to_string())?;
    env.set_long_array_region(&a, 0, v)
        .map_err(|e| e.to_string())?;
    Ok(a.into_raw())
}

/// The sequences a Java `long[]` holds (none for null).
fn seqs(env: &mut JNIEnv<'_>, a: &JLongArray<'_>) -> Result<Vec<u64>, String> {
    if a.is_null() {
        return Ok(Vec::new());
    }
    let n = env.get_array_length(a).map_err(|e| e.to_string())?;
    let mut v = vec![0i64; n as usize];
    env.get_long_array_region(a, 0, &mut v)
        .map_err(|e| e.to_string())?;
    Ok(v.into_iter().map(|s| s.max(0) as u64).collect())
}

fn into_handle<T>(v: T) -> jlong {
    Box::into_raw(Box::new(v)) as jlong
}

/// # Safety
/// `h` is a live handle of type `T` made by [`into_handle`].
unsafe fn handle<'a, T>(h: jlong) -> Result<&'a mut T, String> {
    if h == 0 {
        return Err("use of a closed handle".into());
    }
    Ok(&mut *(h as *mut T))
}

/// # Safety
/// `h` is a handle of type `T` made by [`into_handle`], not used again afterwards.
unsafe fn free<T>(h: jlong) {
    if h != 0 {
        drop(Box::from_raw(h as *mut T));
    }
}

/// Java's `Long.MAX_VALUE` stands for "no bound".
fn bound(v: jlong) -> u64 {
    if v == i64::MAX {
        u64::MAX
    } else {
        v.max(0) as u64
    }
}

// -- archives ---------------------------------------------------------------------------

#[no_mangle]
pub extern "system" fn Java_seqbus_spark_Native_archiveOpen<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    path: JString<'l>,
) -> jlong {
    guard(&mut env, 0, |env| {
        let p = string(env, &path)?;
        Ok(into_handle(
            ArchiveReader::open(Path::new(&p)).map_err(|e| e.to_string())?,
        ))
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_spark_Native_archiveClose(
    _: JNIEnv<'_>,
    _: JClass<'_>,
    h: jlong,
) {
    // SAFETY: the JVM closes each reader once.
    unsafe { free::<ArchiveReader>(h) }
}

/// `{"sealed": …, "first": n|null, "last": n|null, "schemas": "[[id, package, ir], …]"}`
#[no_mangle]
pub extern "system" fn Java_seqbus_spark_Native_archiveInfo<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) -> jstring {
    guard(&mut env, std::ptr::null_mut(), |env| {
        // SAFETY: a live reader handle.
        let a = unsafe { handle::<ArchiveReader>(h)? };
        let span = a.span();
        let catalog = Catalog::new(a.schemas.clone())?;
        let v = serde_json::json!({
            "sealed": a.manifest.sealed,
            "first": span.map(|s| s.0),
            "last": span.map(|s| s.1),
            "schemas": catalog.to_json(),
        });
        jstr(env, &v.to_string())
    })
}

/// The records within the bounds as inclusive sequence ranges of at most `rows`, flattened.
#[no_mangle]
pub extern "system" fn Java_seqbus_spark_Native_archivePlan<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    seq_lo: jlong,
    seq_hi: jlong,
    ts_lo: jlong,
    ts_hi: jlong,
    rows: jlong,
) -> jlongArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        // SAFETY: a live reader handle.
        let a = unsafe { handle::<ArchiveReader>(h)? };
        let plan = a.plan(
            bound(seq_lo),
            bound(seq_hi),
            bound(ts_lo),
            bound(ts_hi),
            rows.max(1) as u64,
        );
        let flat: Vec<i64> = plan
            .iter()
            .flat_map(|&(l, h)| [l as i64, h as i64])
            .collect();
        longs(env, &flat)
    })
}

// -- tables -----------------------------------------------------------------------------

/// The table a read makes: `{"table", "schema_id", "message", "spark": schema JSON}`; a
/// message the schemas do not have is an error naming the ones they have.
#[no_mangle]
pub extern "system" fn Java_seqbus_spark_Native_tableInfo<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    schemas: JString<'l>,
    table: JString<'l>,
    message: JString<'l>,
) -> jstring {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let catalog = Catalog::from_json(&string(env, &schemas)?)?;
        let table = string(env, &table)?;
        let message = string(env, &message)?;
        let v = match (table.as_str(), message.as_str()) {
            ("envelope", "") => {
                serde_json::json!({"table": "envelope", "schema_id": 0, "message": "",
                                                   "spark": table::envelope_schema()})
            }
            ("raw", "") => serde_json::json!({"table": "raw", "schema_id": 0, "message": "",
                                              "spark": table::raw_schema()}),
            ("problems", "") => {
                serde_json::json!({"table": "problems", "schema_id": 0, "message": "",
                                                   "spark": table::problems_schema()})
            }
            ("envelope", m) => {
                let (sid, name) = catalog.resolve(m)?;
                let ir = catalog.ir(sid).ok_or("schema vanished")?;
                serde_json::json!({"table": "typed", "schema_id": sid, "message": name,
                                   "spark": schema::typed(&ir, &name)?})
            }
            (t, m) => {
                return Err(format!(
                    "table {t:?} with message {m:?}: give either a message (its typed table) or \
                     table envelope, raw or problems"
                ))
            }
        };
        jstr(env, &v.to_string())
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_spark_Native_decoderNew<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    schemas: JString<'l>,
    table: JString<'l>,
    schema_id: jint,
    message: JString<'l>,
    want: JBooleanArray<'l>,
) -> jlong {
    guard(&mut env, 0, |env| {
        let catalog = Catalog::from_json(&string(env, &schemas)?)?;
        let table = string(env, &table)?;
        let message = string(env, &message)?;
        let n = env.get_array_length(&want).map_err(|e| e.to_string())? as usize;
        let mut flags = vec![0u8; n];
        env.get_boolean_array_region(&want, 0, &mut flags)
            .map_err(|e| e.to_string())?;
        let want: Vec<bool> = flags.iter().map(|&b| b != 0).collect();
        Ok(into_handle(Decoder::new(
            &catalog,
            &table,
            schema_id as u16,
            &message,
            &want,
        )?))
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_spark_Native_decoderFree(
    _: JNIEnv<'_>,
    _: JClass<'_>,
    h: jlong,
) {
    // SAFETY: the JVM frees each decoder once.
    unsafe { free::<Decoder>(h) }
}

/// Decodes the messages (records, for the raw table) of `[lo, hi]`; for the problems table,
/// verifies the whole archive.
#[no_mangle]
pub extern "system" fn Java_seqbus_spark_Native_decodeArchive<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    reader: jlong,
    decoder: jlong,
    lo: jlong,
    hi: jlong,
) -> jlong {
    guard(&mut env, 0, |_| {
        // SAFETY: live handles.
        let (a, d) = unsafe {
            (
                handle::<ArchiveReader>(reader)?,
                handle::<Decoder>(decoder)?,
            )
        };
        if let table::Table::Problems = d.table {
            let rep = verify_archive(a, &mut |_| {});
            return Ok(into_handle(Batch::of_problems(&rep.problems, &d.want)));
        }
        let (lo, hi) = (lo.max(0) as u64, hi.max(0) as u64);
        let mode = if let table::Table::Raw = d.table {
            Mode::Raw
        } else {
            Mode::Messages
        };
        let mut b = d.builder(hi.saturating_sub(lo).saturating_add(1).min(1 << 20) as usize);
        let mut problems: Vec<Problem> = Vec::new();
        a.read(lo, hi, mode, &mut problems, &mut |m| b.push(m));
        let mut batch = b.finish();
        problems.append(&mut batch.problems);
        problems.sort_by_key(|p| p.sequence);
        batch.problems = problems;
        Ok(into_handle(batch))
    })
}

/// `[rows, problems, columns, then six longs per column node, pre-order]` (see
/// [`table::JCol::layout`]).
#[no_mangle]
pub extern "system" fn Java_seqbus_spark_Native_batchLayout<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) -> jlongArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        // SAFETY: a live batch handle.
        let b = unsafe { handle::<Batch>(h)? };
        longs(env, &b.layout())
    })
}

/// The batch's problems: `[[file, offset, sequence, message], …]`.
#[no_mangle]
pub extern "system" fn Java_seqbus_spark_Native_batchProblems<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) -> jstring {
    guard(&mut env, std::ptr::null_mut(), |env| {
        // SAFETY: a live batch handle.
        let b = unsafe { handle::<Batch>(h)? };
        jstr(env, &b.problems_json())
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_spark_Native_batchFree(_: JNIEnv<'_>, _: JClass<'_>, h: jlong) {
    // SAFETY: the JVM frees each batch once, after its last use.
    unsafe { free::<Batch>(h) }
}

// -- remote streams ---------------------------------------------------------------------

fn login(
    env: &mut JNIEnv<'_>,
    server: &JString<'_>,
    user: &JString<'_>,
    password: &JString<'_>,
    session: &JString<'_>,
) -> Result<Login, String> {
    Ok(Login {
        server: string(env, server)?,
        username: string(env, user)?,
        password: string(env, password)?,
        session: string(env, session)?,
    })
}

/// A message read from a live stream (its origin stands for the file of an archive record).
fn streamed<'a>(
    seq: u64,
    origin: &'a str,
    msg: &'a [u8],
    body: Cow<'a, [u8]>,
    fragments: u32,
) -> Msg<'a> {
    Msg {
        sequence: seq,
        file: origin,
        offset: 0,
        envelope: &msg[..32],
        body,
        fragments,
    }
}

/// A range of a live stream being read: the login and the reassembly state.
struct RemoteReader {
    remote: Remote,
    reassembler: Reassembler,
    next: u64,
    /// The range's first sequence; before it, only the fragments in `prefix` are taken.
    lo: u64,
    /// The earlier fragments of messages that were open at `lo` and end in the range (the
    /// offsets of the batch's two ends tell which): reassembled, never handed out.
    prefix: HashSet<u64>,
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_seqbus_spark_Native_remoteOpen<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    server: JString<'l>,
    user: JString<'l>,
    password: JString<'l>,
    session: JString<'l>,
    from: jlong,
    prefix: JLongArray<'l>,
    timeout_ms: jint,
) -> jlong {
    guard(&mut env, 0, |env| {
        let l = login(env, &server, &user, &password, &session)?;
        let lo = from.max(1) as u64;
        let prefix: HashSet<u64> = seqs(env, &prefix)?
            .into_iter()
            .filter(|&s| s < lo)
            .collect();
        let at = prefix.iter().copied().fold(lo, u64::min);
        let remote = Remote::connect(&l, at, Duration::from_millis(timeout_ms.max(1) as u64))?;
        Ok(into_handle(RemoteReader {
            remote,
            reassembler: Reassembler::default(),
            next: at,
            lo,
            prefix,
        }))
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_spark_Native_remoteClose(
    _: JNIEnv<'_>,
    _: JClass<'_>,
    h: jlong,
) {
    if h != 0 {
        // SAFETY: the JVM closes each reader once.
        let r = unsafe { Box::from_raw(h as *mut RemoteReader) };
        r.remote.close();
    }
}

/// Decodes the next messages of a live stream, up to sequence `hi` (inclusive) or `max`
/// records, whichever comes first; waits at most `wait_ms` for each record.
#[no_mangle]
pub extern "system" fn Java_seqbus_spark_Native_decodeRemote<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    reader: jlong,
    decoder: jlong,
    hi: jlong,
    max: jlong,
    wait_ms: jint,
) -> jlong {
    guard(&mut env, 0, |_| {
        // SAFETY: live handles.
        let (r, d) = unsafe { (handle::<RemoteReader>(reader)?, handle::<Decoder>(decoder)?) };
        let raw = matches!(d.table, table::Table::Raw);
        let origin = format!("soupbintcp://{}", r.remote.server);
        let mut b = d.builder(max.clamp(1, 1 << 20) as usize);
        let mut taken = 0;
        while r.next <= hi as u64 && taken < max {
            let Some((seq, msg)) = r
                .remote
                .next(Duration::from_millis(wait_ms.max(1) as u64))?
            else {
                return Err(format!(
                    "{origin}: no message {} within {wait_ms} ms (the stream had reached it when the batch was planned)",
                    r.next
                ));
            };
            if seq != r.next {
                return Err(format!(
                    "{origin}: message {seq} came where {} was next",
                    r.next
                ));
            }
            r.next += 1;
            if seq < r.lo {
                // an earlier fragment of a message that ends in the range: joined, not counted
                if !raw && msg.len() >= 32 && r.prefix.contains(&seq) {
                    r.reassembler.push(&msg);
                }
                continue;
            }
            taken += 1;
            if msg.len() < 32 {
                b.problems.push(Problem {
                    file: origin.clone(),
                    offset: 0,
                    sequence: seq,
                    message: format!("message of {} bytes, shorter than an envelope", msg.len()),
                });
                continue;
            }
            if raw {
                b.push(&streamed(seq, &origin, &msg, Cow::Borrowed(&msg[32..]), 1));
                continue;
            }
            match r.reassembler.push(&msg) {
                Step::Whole(None, n) => {
                    b.push(&streamed(seq, &origin, &msg, Cow::Borrowed(&msg[32..]), n))
                }
                Step::Whole(Some(body), n) => {
                    b.push(&streamed(seq, &origin, &msg, Cow::Owned(body), n))
                }
                Step::More => {}
                Step::Bad(why) => b
                    .problems
                    .push(streamed(seq, &origin, &msg, Cow::Borrowed(&[]), 1).problem(why)),
            }
        }
        Ok(into_handle(b.finish()))
    })
}

#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_seqbus_spark_Native_followStart<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    server: JString<'l>,
    user: JString<'l>,
    password: JString<'l>,
    session: JString<'l>,
    from: jlong,
    open: JLongArray<'l>,
) -> jlong {
    guard(&mut env, 0, |env| {
        let l = login(env, &server, &user, &password, &session)?;
        // [per open message: its count of fragments, their sequences], as followLatest's tail
        let flat = seqs(env, &open)?;
        let mut open = Vec::new();
        let mut i = 0;
        while i < flat.len() {
            let n = flat[i] as usize;
            let m = flat
                .get(i + 1..i + 1 + n)
                .ok_or_else(|| format!("followStart: open messages cut short at {i}"))?;
            open.push(m.to_vec());
            i += 1 + n;
        }
        Ok(into_handle(Follower::start(l, from.max(1) as u64, &open)?))
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_spark_Native_followLatest<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    start: jlong,
    max: jlong,
) -> jlongArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        // SAFETY: a live follower handle.
        let f = unsafe { handle::<Follower>(h)? };
        let c = f.latest(start.max(0) as u64, bound(max))?;
        // [end, then per open message: its count of fragments, their sequences]
        let mut v = vec![c.end as i64];
        for m in &c.open {
            v.push(m.len() as i64);
            v.extend(m.iter().map(|&s| s as i64));
        }
        longs(env, &v)
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_spark_Native_followCommit<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    upto: jlong,
) {
    guard(&mut env, (), |_| {
        // SAFETY: a live follower handle.
        let f = unsafe { handle::<Follower>(h)? };
        f.commit(upto.max(0) as u64);
        Ok(())
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_spark_Native_followClose(
    _: JNIEnv<'_>,
    _: JClass<'_>,
    h: jlong,
) {
    // SAFETY: the JVM closes each follower once.
    unsafe { free::<Follower>(h) }
}
