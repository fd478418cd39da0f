//! The Spark schema (as `DataType.fromJson` reads it) of a typed table, from the schema IR:
//! the same mapping as the Arrow schemas of `seqbus.archive.tables` (docs/spark.md, "Typed
//! tables"; tests/spark compares the two).

use serde_json::{json, Value};

use seqbus_archive::ir;

fn primitive(p: &str) -> Result<Value, String> {
    Ok(json!(match p {
        "bool" => "boolean",
        "u8" => "short",
        "u16" => "integer",
        "u32" => "long",
        "u64" => "decimal(20,0)",
        "i8" => "byte",
        "i16" => "short",
        "i32" => "integer",
        "i64" => "long",
        "f32" => "float",
        "f64" => "double",
        _ => return Err(format!("unknown primitive {p:?}")),
    }))
}

fn field(name: &str, ty: Value, nullable: bool) -> Value {
    json!({"name": name, "type": ty, "nullable": nullable, "metadata": {}})
}

fn fixed(s: &ir::Schema, t: &ir::Type, depth: usize) -> Result<Value, String> {
    if depth > 16 {
        return Err("structs nested too deep".into());
    }
    Ok(match t.kind.as_str() {
        "primitive" => primitive(t.primitive.as_deref().unwrap_or(""))?,
        "char" | "enum" => json!("string"),
        "byte" => json!("binary"),
        "flags" => json!({"type": "array", "elementType": "string", "containsNull": false}),
        "struct" => {
            let st = s
                .structs
                .iter()
                .find(|x| x.name == t.name)
                .ok_or_else(|| format!("unknown struct {}", t.name))?;
            let mut fs = Vec::new();
            for f in &st.fields {
                let ft =
                    f.ty.as_ref()
                        .ok_or_else(|| format!("{}.{} has no type", st.name, f.name))?;
                fs.push(field(&f.name, fixed(s, ft, depth + 1)?, false));
            }
            json!({"type": "struct", "fields": fs})
        }
        k => return Err(format!("unknown type kind {k:?}")),
    })
}

fn block(s: &ir::Schema, b: &ir::Block, depth: usize) -> Result<Vec<Value>, String> {
    if depth > 16 {
        return Err("groups nested too deep".into());
    }
    let mut out = Vec::new();
    for f in &b.fields {
        let ty = || {
            f.ty.as_ref()
                .ok_or_else(|| format!("{}.{} has no type", b.path, f.name))
        };
        out.push(match f.kind.as_str() {
            "fixed" => field(&f.name, fixed(s, ty()?, 0)?, false),
            "optional" => field(&f.name, fixed(s, ty()?, 0)?, true),
            "string" => field(&f.name, json!("string"), false),
            "bytes" => field(&f.name, json!("binary"), false),
            "group" => {
                let g = f
                    .group
                    .as_ref()
                    .ok_or_else(|| format!("{}.{} has no group", b.path, f.name))?;
                let entry = json!({"type": "struct", "fields": block(s, g, depth + 1)?});
                field(
                    &f.name,
                    json!({"type": "array", "elementType": entry, "containsNull": false}),
                    false,
                )
            }
            k => return Err(format!("{}.{}: unknown field kind {k:?}", b.path, f.name)),
        });
    }
    Ok(out)
}

/// The typed table of `message`: the envelope prefix (renamed `envelope_<name>` where a field
/// has the name), then the message's fields.
pub fn typed(s: &ir::Schema, message: &str) -> Result<String, String> {
    let m = s
        .message(message)
        .ok_or_else(|| format!("package {} has no message {message:?}", s.package))?;
    let fields = block(s, &m.body, 0)?;
    let names: Vec<&str> = m.body.fields.iter().map(|f| f.name.as_str()).collect();
    let prefix = [
        ("sequence", "long"),
        ("timestamp_ns", "long"),
        ("account", "string"),
        ("instance", "integer"),
        ("command_seq", "long"),
        ("version", "integer"),
    ];
    let mut all: Vec<Value> = prefix
        .iter()
        .map(|(n, t)| {
            let name = if names.contains(n) {
                format!("envelope_{n}")
            } else {
                n.to_string()
            };
            field(&name, json!(t), false)
        })
        .collect();
    all.extend(fields);
    Ok(json!({"type": "struct", "fields": all}).to_string())
}
