"""``seqc compat OLD NEW``: every change from OLD to NEW that breaks readers or writers of
the other version, with its position.

Compares two IRs of one schema. Breaking: a changed schema id, a lower version, a removed or
renumbered message, a removed, retyped or moved field (offset or group/var position), a field
added without ``@since`` above the old version, a changed ``@since``, a removed or renumbered
enum value. Reported but not breaking: added messages, fields, enum values.
"""

from __future__ import annotations

from dataclasses import dataclass

from seqc import ir


@dataclass(frozen=True)
class Change:
    file: str
    line: int
    col: int
    code: str
    breaking: bool
    message: str

    def render(self) -> str:
        kind = "breaking" if self.breaking else "note"
        return f"{self.file}:{self.line}:{self.col}: {kind}[{self.code}]: {self.message}"


def _type_sig(t: ir.Type | None, schema: ir.Schema) -> str:
    if t is None:
        return "group"
    if t.kind == "struct":
        s = schema.struct(t.name)
        inner = ", ".join(f"{f.name}: {_type_sig(f.type, schema)}" for f in s.fields)
        return f"{t.name} {{{inner}}}"
    if t.kind in ("enum", "flags"):
        return f"{t.kind} {t.name} : {t.primitive}"
    if t.kind in ("char", "byte"):
        return f"{t.kind}[{t.length}]"
    return t.name


def _field_sig(f: ir.Field, schema: ir.Schema) -> str:
    if f.kind in ("string", "bytes", "group"):
        return f.kind
    prefix = "optional " if f.kind == "optional" else ""
    return prefix + _type_sig(f.type, schema)


class _Comparer:
    def __init__(self, old: ir.Schema, new: ir.Schema) -> None:
        self.old = old
        self.new = new
        self.changes: list[Change] = []

    def add(self, where: str, line: int, col: int, code: str, breaking: bool, msg: str) -> None:
        self.changes.append(Change(where, line, col, code, breaking, msg))

    def run(self) -> list[Change]:
        old, new = self.old, self.new
        if old.schema_id != new.schema_id:
            self.add(new.source, 1, 1, "C001", True,
                     f"schema id changed from {old.schema_id} to {new.schema_id}")
        if new.version < old.version:
            self.add(new.source, 1, 1, "C002", True,
                     f"version went down from {old.version} to {new.version}")
        new_by_name = {m.name: m for m in new.messages}
        new_by_id = {m.id: m for m in new.messages}
        for m in old.messages:
            nm = new_by_name.get(m.name)
            if nm is None:
                other = new_by_id.get(m.id)
                extra = f" (id {m.id} now belongs to {other.name})" if other else ""
                self.add(old.source, m.line, 1, "C010", True,
                         f"message {m.name} (id {m.id}) removed{extra}")
                continue
            if nm.id != m.id:
                self.add(new.source, nm.line, 1, "C011", True,
                         f"message {m.name} id changed from {m.id} to {nm.id}")
            self.block(m.body, nm.body)
        old_names = {m.name for m in old.messages}
        for m in new.messages:
            if m.name not in old_names:
                clash = next((o for o in old.messages if o.id == m.id), None)
                if clash is None:
                    self.add(new.source, m.line, 1, "C012", False,
                             f"message {m.name} (id {m.id}) added")
        self.enums()
        return sorted(self.changes, key=lambda c: (not c.breaking, c.file, c.line, c.col))

    def enums(self) -> None:
        new_enums = {e.name: e for e in self.new.enums}
        for e in self.old.enums:
            ne = new_enums.get(e.name)
            if ne is None:
                continue  # a type no field uses any more; fields that used it are reported
            new_values = {v.name: v.value for v in ne.values}
            for v in e.values:
                if v.name not in new_values:
                    self.add(ne.source, ne.line, 1, "C030", True,
                             f"{e.name}.{v.name} (= {v.value}) removed")
                elif new_values[v.name] != v.value:
                    self.add(ne.source, ne.line, 1, "C031", True,
                             f"{e.name}.{v.name} changed from {v.value} to "
                             f"{new_values[v.name]}")
            old_values = {v.name for v in e.values}
            for v in ne.values:
                if v.name not in old_values:
                    self.add(ne.source, ne.line, 1, "C032", False,
                             f"{e.name}.{v.name} (= {v.value}) added; readers of the old "
                             "schema reject it")

    def block(self, ob: ir.Block, nb: ir.Block) -> None:
        old, new = self.old, self.new
        new_fields = {f.name: f for f in nb.fields}
        for f in ob.fields:
            nf = new_fields.get(f.name)
            path = f"{ob.path}.{f.name}"
            if nf is None:
                self.add(old.source, f.line, f.col, "C020", True, f"field {path} removed")
                continue
            osig, nsig = _field_sig(f, old), _field_sig(nf, new)
            if osig != nsig:
                self.add(new.source, nf.line, nf.col, "C021", True,
                         f"field {path} retyped from `{osig}` to `{nsig}`")
            elif f.offset != nf.offset or f.index != nf.index:
                where = (f"offset {f.offset} -> {nf.offset}" if f.offset is not None
                         else f"position {f.index} -> {nf.index}")
                self.add(new.source, nf.line, nf.col, "C022", True,
                         f"field {path} moved ({where})")
            if f.since != nf.since:
                self.add(new.source, nf.line, nf.col, "C023", True,
                         f"field {path} @since changed from {f.since} to {nf.since}")
            if f.group is not None and nf.group is not None:
                self.block(f.group, nf.group)
        old_names = {f.name for f in ob.fields}
        for nf in nb.fields:
            if nf.name in old_names:
                continue
            path = f"{nb.path}.{nf.name}"
            if nf.since <= old.version and nf.since <= nb.since:
                self.add(new.source, nf.line, nf.col, "C024", True,
                         f"field {path} added without @since({old.version + 1}): readers "
                         "would require it from writers of the old version")
            else:
                self.add(new.source, nf.line, nf.col, "C025", False,
                         f"field {path} added (@since({nf.since}))")


def compare(old: ir.Schema, new: ir.Schema) -> list[Change]:
    return _Comparer(old, new).run()


def render(changes: list[Change]) -> str:
    return "\n".join(c.render() for c in changes)
