//! The schema IR as `seqc ir --json` writes it (compiler/seqc/ir.py): only what decoding needs.
//! Unknown keys are ignored so that the IR may grow.

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
pub struct Schema {
    pub format: String,
    pub ir_version: u32,
    pub package: String,
    pub schema_id: u16,
    pub version: u16,
    #[serde(default)]
    pub enums: Vec<Enum>,
    #[serde(default)]
    pub structs: Vec<Struct>,
    #[serde(default)]
    pub messages: Vec<Message>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Type {
    pub kind: String,
    pub name: String,
    pub size: u32,
    pub primitive: Option<String>,
    pub length: Option<u32>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Field {
    pub name: String,
    pub kind: String,
    #[serde(rename = "type")]
    pub ty: Option<Type>,
    pub offset: Option<u32>,
    pub size: u32,
    pub since: u32,
    pub index: Option<u32>,
    pub group: Option<Block>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Block {
    pub name: String,
    pub path: String,
    pub block_length: u32,
    pub fields: Vec<Field>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct EnumValue {
    pub name: String,
    pub value: i64,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Enum {
    pub name: String,
    pub primitive: String,
    pub is_flags: bool,
    pub values: Vec<EnumValue>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Struct {
    pub name: String,
    pub size: u32,
    pub fields: Vec<Field>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub name: String,
    pub id: u16,
    pub body: Block,
}

impl Schema {
    pub fn parse(json: &str) -> Result<Schema, String> {
        let s: Schema = serde_json::from_str(json).map_err(|e| format!("not seqc IR: {e}"))?;
        if s.format != "seqc-ir" || s.ir_version != 1 {
            return Err(format!(
                "IR format {:?} version {}, expected \"seqc-ir\" version 1",
                s.format, s.ir_version
            ));
        }
        Ok(s)
    }

    pub fn message(&self, name: &str) -> Option<&Message> {
        self.messages.iter().find(|m| m.name == name)
    }
}
