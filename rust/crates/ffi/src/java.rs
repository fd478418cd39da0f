//! The JNI functions of the Java node (`runtime/java/node`, class `seqbus.node.Native`).
//!
//! JNI, not Java's foreign-function API: the project's Java is 17, where that API is still a
//! preview (final from Java 22), and the Spark source crosses JNI already. Every function
//! converts its arguments, calls [`crate::node::Node`] (the same code as the C functions) and
//! turns an error into a `seqbus.node.SeqbusException` carrying the status code
//! (`BackPressureException` for back-pressure), and a panic into one with
//! `SEQBUS_ERR_PANIC`. Bodies are read in place: the JVM wraps the batch in a direct
//! `ByteBuffer` (re-made only when the batch's memory moved) and an event says where a body
//! lies in it.
//!
//! A node is a boxed [`JavaNode`] handed to the JVM as a `long`, freed exactly once by
//! `close`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use jni::objects::{
    JByteArray, JByteBuffer, JClass, JIntArray, JLongArray, JObject, JString, JValue,
};
use jni::sys::{jboolean, jint, jlong, jobject, jobjectArray, JNI_FALSE, JNI_TRUE};
use jni::JNIEnv;

use crate::node::{Event, Node, OpenArgs};
use crate::{
    log_message, log_to_stderr, panic_text, Failure, Res, SeqbusEvent, SeqbusStats,
    SEQBUS_ERR_ARGUMENT, SEQBUS_ERR_BACKPRESSURE, SEQBUS_ERR_PANIC, SEQBUS_ON_ERROR_SKIP,
    SEQBUS_ON_ERROR_STOP, SEQBUS_ON_ERROR_UNSET,
};

const EXCEPTION: &str = "seqbus/node/SeqbusException";
const BACKPRESSURE: &str = "seqbus/node/BackPressureException";
/// Longs an event fills (`seqbus.node.Native.EVENT_LONGS`).
const EVENT_LONGS: usize = 12;
/// `poll`'s result bit: the batch's memory moved, wrap it again (`Native.buffer`).
const BUFFER_MOVED: jlong = 1 << 32;

/// A node and where the JVM's view of its batch buffer points.
pub struct JavaNode {
    node: Node,
    /// (address, capacity) of the batch memory the JVM last wrapped.
    wrapped: (usize, usize),
    /// Bodies sent from a `byte[]` are copied here first.
    scratch: Vec<u8>,
}

fn jni_failure(e: jni::errors::Error) -> Failure {
    Failure::new(SEQBUS_ERR_ARGUMENT, format!("JNI: {e}"))
}

/// Runs `f`, turning an error into a pending `SeqbusException` (and `fallback`), a panic
/// into one with `SEQBUS_ERR_PANIC`.
fn guard<'l, T>(env: &mut JNIEnv<'l>, fallback: T, f: impl FnOnce(&mut JNIEnv<'l>) -> Res<T>) -> T {
    let failure = match catch_unwind(AssertUnwindSafe(|| f(env))) {
        Ok(Ok(v)) => return v,
        Ok(Err(failure)) => failure,
        Err(p) => Failure::new(SEQBUS_ERR_PANIC, panic_text(p.as_ref())),
    };
    if !env.exception_check().unwrap_or(false) {
        throw(env, &failure);
    }
    fallback
}

fn throw(env: &mut JNIEnv<'_>, failure: &Failure) {
    if failure.code == SEQBUS_ERR_BACKPRESSURE {
        let _ = env.throw_new(BACKPRESSURE, &failure.message);
        return;
    }
    let made = env.new_string(&failure.message).and_then(|m| {
        env.new_object(
            EXCEPTION,
            "(ILjava/lang/String;)V",
            &[JValue::Int(failure.code), JValue::Object(&m)],
        )
    });
    match made {
        Ok(e) => {
            let _ = env.throw(jni::objects::JThrowable::from(e));
        }
        Err(_) => {
            let _ = env.throw_new(EXCEPTION, &failure.message);
        }
    }
}

fn string(env: &mut JNIEnv<'_>, s: &JString<'_>, what: &str) -> Res<Option<String>> {
    if s.is_null() {
        return Ok(None);
    }
    env.get_string(s)
        .map(|s| Some(s.into()))
        .map_err(|e| Failure::new(SEQBUS_ERR_ARGUMENT, format!("{what}: {e}")))
}

fn required(env: &mut JNIEnv<'_>, s: &JString<'_>, what: &str) -> Res<String> {
    string(env, s, what)?
        .ok_or_else(|| Failure::new(SEQBUS_ERR_ARGUMENT, format!("{what} is null")))
}

/// # Safety
/// `h` is 0 or a live handle made by `open`.
unsafe fn handle<'a>(h: jlong) -> Res<&'a mut JavaNode> {
    // SAFETY: the caller's promise
    unsafe { (h as *mut JavaNode).as_mut() }
        .ok_or_else(|| Failure::new(SEQBUS_ERR_ARGUMENT, "the node is closed"))
}

fn nanos(v: jlong) -> Duration {
    Duration::from_nanos(v.max(0) as u64)
}

/// `(offset, length)` checked against an array or buffer of `size` bytes.
fn span(offset: jint, length: jint, size: usize) -> Res<(usize, usize)> {
    let (o, l) = (offset as i64, length as i64);
    if o < 0 || l < 0 || o + l > size as i64 {
        return Err(Failure::new(
            SEQBUS_ERR_ARGUMENT,
            format!("offset {offset} and length {length} outside a body of {size} bytes"),
        ));
    }
    Ok((o as usize, l as usize))
}

/// The bytes of `array[offset..offset + length]`, copied into the node's scratch buffer.
fn array_body<'a>(
    env: &mut JNIEnv<'_>,
    scratch: &'a mut Vec<u8>,
    array: &JByteArray<'_>,
    offset: jint,
    length: jint,
) -> Res<&'a [u8]> {
    if array.is_null() {
        return Err(Failure::new(SEQBUS_ERR_ARGUMENT, "body is null"));
    }
    let size = env.get_array_length(array).map_err(jni_failure)? as usize;
    let (o, l) = span(offset, length, size)?;
    scratch.clear();
    scratch.resize(l, 0);
    // SAFETY: i8 and u8 have one layout
    let dst = unsafe { std::slice::from_raw_parts_mut(scratch.as_mut_ptr().cast::<i8>(), l) };
    env.get_byte_array_region(array, o as i32, dst)
        .map_err(jni_failure)?;
    Ok(scratch)
}

/// The bytes of a direct buffer's `[offset..offset + length]`, in place.
fn direct_body<'a>(
    env: &mut JNIEnv<'_>,
    buffer: &JByteBuffer<'_>,
    offset: jint,
    length: jint,
) -> Res<&'a [u8]> {
    if buffer.is_null() {
        return Err(Failure::new(SEQBUS_ERR_ARGUMENT, "body is null"));
    }
    let p = env
        .get_direct_buffer_address(buffer)
        .map_err(|_| Failure::new(SEQBUS_ERR_ARGUMENT, "the body is not a direct ByteBuffer"))?;
    let size = env
        .get_direct_buffer_capacity(buffer)
        .map_err(jni_failure)?;
    let (o, l) = span(offset, length, size)?;
    // SAFETY: the JVM keeps a direct buffer's memory for as long as the buffer is reachable,
    // which it is for this call; o + l lies inside its capacity
    Ok(unsafe { std::slice::from_raw_parts(p.add(o), l) })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_open<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    config: JString<'l>,
    account: JString<'l>,
    instance: jint,
    start: jlong,
    topics: JIntArray<'l>,
    listen: JString<'l>,
) -> jlong {
    guard(&mut env, 0, |env| {
        let config = required(env, &config, "config")?;
        let account = required(env, &account, "account")?;
        let listen = string(env, &listen, "listen")?;
        let instance = u16::try_from(instance).map_err(|_| {
            Failure::new(
                SEQBUS_ERR_ARGUMENT,
                format!("instance {instance} is not 0..65535"),
            )
        })?;
        if start < 0 {
            return Err(Failure::new(
                SEQBUS_ERR_ARGUMENT,
                format!("start {start}: 0 (live), 1 (rewind) or a sequence number"),
            ));
        }
        let topics = if topics.is_null() {
            None
        } else {
            let n = env.get_array_length(&topics).map_err(jni_failure)? as usize;
            let mut v = vec![0i32; n];
            env.get_int_array_region(&topics, 0, &mut v)
                .map_err(jni_failure)?;
            // schema id in the high 16 bits, template id in the low
            Some(
                v.into_iter()
                    .map(|t| ((t as u32 >> 16) as u16, t as u16))
                    .collect(),
            )
        };
        let node = Node::open(OpenArgs {
            config: &config,
            account: &account,
            instance,
            start: start as u64,
            topics,
            listen: listen.as_deref(),
        })?;
        Ok(Box::into_raw(Box::new(JavaNode {
            node,
            wrapped: (0, 0),
            scratch: Vec::new(),
        })) as jlong)
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_waitReady<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    timeout_ns: jlong,
) {
    guard(&mut env, (), |_| {
        // SAFETY: the JVM hands back the handle `open` made
        unsafe { handle(h) }?.node.wait_ready(nanos(timeout_ns))
    })
}

/// The records that came, with [`BUFFER_MOVED`] set when the JVM must wrap the batch again.
#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_poll<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    max_records: jint,
    timeout_ns: jlong,
) -> jlong {
    guard(&mut env, 0, |_| {
        // SAFETY: the JVM hands back the handle `open` made
        let jn = unsafe { handle(h) }?;
        let n = jn
            .node
            .poll(max_records.max(1) as usize, nanos(timeout_ns))?;
        let b = jn.node.batch();
        let moved = (b.as_ptr() as usize, b.capacity()) != jn.wrapped;
        Ok(n as jlong | if moved { BUFFER_MOVED } else { 0 })
    })
}

/// A direct `ByteBuffer` over the batch's memory (its whole capacity), valid until the next
/// `poll` says it moved, or `close`.
#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_buffer<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) -> jobject {
    guard(&mut env, std::ptr::null_mut(), |env| {
        // SAFETY: the JVM hands back the handle `open` made
        let jn = unsafe { handle(h) }?;
        let b = jn.node.batch();
        let (ptr, cap) = (b.as_ptr() as *mut u8, b.capacity());
        // SAFETY: the batch's memory lives as long as the node and does not move until a
        // poll reports it; the JVM reads only the records the events point to
        let buffer = unsafe { env.new_direct_byte_buffer(ptr, cap) }.map_err(jni_failure)?;
        jn.wrapped = (ptr as usize, cap);
        Ok(buffer.into_raw())
    })
}

/// The next event into `out` (`EVENT_LONGS` longs); its kind, 0 at the end of the batch.
#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_next<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    out: JLongArray<'l>,
) -> jint {
    guard(&mut env, 0, |env| {
        // SAFETY: the JVM hands back the handle `open` made
        let jn = unsafe { handle(h) }?;
        let ev = match jn.node.next_event()? {
            None => return Ok(0),
            Some(ev) => ev,
        };
        let (sequence, time_ns) = match &ev {
            Event::Message { record, .. } => (record.sequence, record.time_ns()),
            _ => (0, 0),
        };
        let mut e = SeqbusEvent::of(&ev, sequence, time_ns);
        if !matches!(ev, Event::Message { .. }) {
            (e.sequence, e.time_ns) = (jn.node.sequence(), jn.node.time_ns());
        }
        let v: [i64; EVENT_LONGS] = [
            e.kind as i64,
            e.flags as i64,
            e.sequence as i64,
            e.time_ns as i64,
            e.body_offset as i64,
            e.body_len as i64,
            (e.block_length as i64)
                | (e.template_id as i64) << 16
                | (e.schema_id as i64) << 32
                | (e.version as i64) << 48,
            i64::from_le_bytes(e.sender),
            (e.sender_instance as i64)
                | (e.envelope_kind as i64) << 16
                | (e.envelope_flags as i64) << 24,
            e.command_seq as i64,
            e.timer_id as i64,
            e.timer_at_ns as i64,
        ];
        env.set_long_array_region(&out, 0, &v)
            .map_err(jni_failure)?;
        Ok(e.kind as jint)
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_send<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    body: JByteArray<'l>,
    offset: jint,
    length: jint,
) -> jlong {
    guard(&mut env, 0, |env| {
        // SAFETY: the JVM hands back the handle `open` made
        let jn = unsafe { handle(h) }?;
        let b = array_body(env, &mut jn.scratch, &body, offset, length)?;
        Ok(jn.node.send(b)? as jlong)
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_sendBuffer<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    body: JByteBuffer<'l>,
    offset: jint,
    length: jint,
) -> jlong {
    guard(&mut env, 0, |env| {
        // SAFETY: the JVM hands back the handle `open` made
        let jn = unsafe { handle(h) }?;
        let b = direct_body(env, &body, offset, length)?;
        Ok(jn.node.send(b)? as jlong)
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_post<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    body: JByteArray<'l>,
    offset: jint,
    length: jint,
) {
    guard(&mut env, (), |env| {
        // SAFETY: the JVM hands back the handle `open` made
        let jn = unsafe { handle(h) }?;
        let b = array_body(env, &mut jn.scratch, &body, offset, length)?;
        jn.node.post(b)
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_postBuffer<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    body: JByteBuffer<'l>,
    offset: jint,
    length: jint,
) {
    guard(&mut env, (), |env| {
        // SAFETY: the JVM hands back the handle `open` made
        let jn = unsafe { handle(h) }?;
        let b = direct_body(env, &body, offset, length)?;
        jn.node.post(b)
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_flush<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) {
    guard(&mut env, (), |_| {
        // SAFETY: the JVM hands back the handle `open` made
        unsafe { handle(h) }?.node.flush()
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_posted<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) -> jint {
    guard(&mut env, 0, |_| {
        // SAFETY: the JVM hands back the handle `open` made
        Ok(unsafe { handle(h) }?.node.posted() as jint)
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_inFlight<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) -> jint {
    guard(&mut env, 0, |_| {
        // SAFETY: the JVM hands back the handle `open` made
        Ok(unsafe { handle(h) }?.node.in_flight() as jint)
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_setTimer<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    at_ns: jlong,
) -> jlong {
    guard(&mut env, 0, |_| {
        // SAFETY: the JVM hands back the handle `open` made
        Ok(unsafe { handle(h) }?.node.set_timer(at_ns.max(0) as u64) as jlong)
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_cancelTimer<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
    id: jlong,
) -> jboolean {
    guard(&mut env, JNI_FALSE, |_| {
        // SAFETY: the JVM hands back the handle `open` made
        let done = unsafe { handle(h) }?.node.cancel_timer(id as u64);
        Ok(if done { JNI_TRUE } else { JNI_FALSE })
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_sequence<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) -> jlong {
    guard(&mut env, 0, |_| {
        // SAFETY: the JVM hands back the handle `open` made
        Ok(unsafe { handle(h) }?.node.sequence() as jlong)
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_timeNs<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) -> jlong {
    guard(&mut env, 0, |_| {
        // SAFETY: the JVM hands back the handle `open` made
        Ok(unsafe { handle(h) }?.node.time_ns() as jlong)
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_isRewinding<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) -> jboolean {
    guard(&mut env, JNI_FALSE, |_| {
        // SAFETY: the JVM hands back the handle `open` made
        let r = unsafe { handle(h) }?.node.is_rewinding();
        Ok(if r { JNI_TRUE } else { JNI_FALSE })
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_isReady<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) -> jboolean {
    guard(&mut env, JNI_FALSE, |_| {
        // SAFETY: the JVM hands back the handle `open` made
        let r = unsafe { handle(h) }?.node.is_ready();
        Ok(if r { JNI_TRUE } else { JNI_FALSE })
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_onError<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) -> jint {
    guard(&mut env, SEQBUS_ON_ERROR_UNSET, |_| {
        // SAFETY: the JVM hands back the handle `open` made
        Ok(match unsafe { handle(h) }?.node.on_error_skip() {
            None => SEQBUS_ON_ERROR_UNSET,
            Some(false) => SEQBUS_ON_ERROR_STOP,
            Some(true) => SEQBUS_ON_ERROR_SKIP,
        })
    })
}

/// The counters, in the order of `statNames`.
#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_stats<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) -> jobject {
    guard(&mut env, std::ptr::null_mut(), |env| {
        // SAFETY: the JVM hands back the handle `open` made
        let s = SeqbusStats::of(&unsafe { handle(h) }?.node);
        let v: Vec<i64> = s.named().iter().map(|(_, v)| *v as i64).collect();
        let a = env.new_long_array(v.len() as i32).map_err(jni_failure)?;
        env.set_long_array_region(&a, 0, &v).map_err(jni_failure)?;
        Ok(a.into_raw())
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_statNames<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
) -> jobjectArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let names = SeqbusStats::default().named();
        let a = env
            .new_object_array(names.len() as i32, "java/lang/String", JObject::null())
            .map_err(jni_failure)?;
        for (i, (name, _)) in names.iter().enumerate() {
            let s = env.new_string(name).map_err(jni_failure)?;
            env.set_object_array_element(&a, i as i32, s)
                .map_err(jni_failure)?;
        }
        Ok(a.into_raw())
    })
}

/// Flushes, closes and frees the node; the handle is not used again.
#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_close<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    h: jlong,
) {
    guard(&mut env, (), |_| {
        if h == 0 {
            return Ok(());
        }
        // SAFETY: made by Box::into_raw in `open`; the JVM closes a handle once
        let jn = unsafe { Box::from_raw(h as *mut JavaNode) };
        jn.node.close()
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_log<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    level: jint,
    message: JString<'l>,
) {
    guard(&mut env, (), |env| {
        let m = required(env, &message, "message")?;
        log_message(level, &m);
        Ok(())
    })
}

#[no_mangle]
pub extern "system" fn Java_seqbus_node_Native_logToStderr<'l>(
    mut env: JNIEnv<'l>,
    _: JClass<'l>,
    program: JString<'l>,
    level: jint,
) {
    guard(&mut env, (), |env| {
        let p = string(env, &program, "program")?.unwrap_or_else(|| "seqbus-node".into());
        let filter = if level <= 0 {
            crate::env_level()
        } else {
            crate::level_filter(level)
        };
        log_to_stderr(&p, filter);
        Ok(())
    })
}
