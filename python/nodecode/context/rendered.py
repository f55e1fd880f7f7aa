"""An export's bytes, rendered again: an export stores only its order and its
digest, so its text is made again from the log when an edit of it is read (or
a file version is shown), and kept with the texts it was rendered from."""

from __future__ import annotations

import hashlib

from nodecode.context import fileformat
from nodecode.context.message import Message
from nodecode.context.model import blob_text, decoded
from nodecode.log import turns as turn_tree
from nodecode.log.store import Event, Store


def export_bytes(store: Store, exp: Event, known: dict[int, Message] | None = None) -> bytes | None:
    """The bytes export ``exp`` wrote: rendered again from the order it recorded
    (or, for an export logged before issue 12, its blob). None if they no
    longer hash to its digest. ``known`` holds messages already read, by id."""
    digest = exp.payload["blob"]
    kept = store.fact("exports", 2).get(digest)
    if kept is not None:
        return kept[0]
    if "context" not in exp.payload:
        return store.blob(digest)
    snap = decoded(store, exp.session, exp.seq)
    sid = exp.session
    texts = _original_texts(store, sid, snap.order, known or {})
    messages = [
        Message(i, role, blob_text(store, snap.texts[i]) if i in snap.texts else text)
        for i, (role, text) in ((i, texts[i]) for i in snap.order)
    ]
    parsed = fileformat.parse_first(exp.text)
    name, number, nonce = parsed[0] if parsed else "", exp.payload["number"], exp.payload["nonce"]
    raw = fileformat.render(name, sid, number, nonce, messages)
    data = raw.encode("utf-8", "surrogatepass")
    if hashlib.sha256(data).hexdigest() != digest:
        return None
    keep_export(store, digest, data, fileformat.first_line(name, sid, number, nonce), messages)
    return data


def export_split(store: Store, exp: Event, data: bytes) -> tuple[str, fileformat.Split]:
    """Export ``exp``'s text (its bytes ``data``) and ``fileformat.split`` of it:
    made from the messages it was rendered from when this process rendered them
    (no parse of 2,000 blocks at each take, and with the blocks' offsets, so
    the edited file is read against it), else by splitting the text."""
    kept = store.fact("exports", 2).get(exp.payload["blob"])
    nonce = exp.payload["nonce"]
    if kept is None or kept[2] is None:
        text = data.decode("utf-8", "surrogatepass")
        return text, fileformat.split(text, nonce)
    if kept[3] is None:
        kept[3] = (
            data.decode("utf-8", "surrogatepass"),
            fileformat.rendered_split(kept[1], nonce, kept[2]),
        )
    return kept[3]


def _original_texts(
    store: Store, sid: str, ids: list[int], known: dict[int, Message]
) -> dict[int, tuple[str, str]]:
    """(role, text) of each message id as logged, from ``known`` or the log
    (this session's, then its ancestors' up to each fork point)."""
    out = {i: (known[i].role, known[i].text) for i in ids if i in known}
    for owner, upto in turn_tree.scopes(store, sid):
        missing = [i for i in ids if i not in out and (upto is None or i <= upto)]
        for k in range(0, len(missing), 500):
            part = missing[k : k + 500]
            rows = store.read(
                f"SELECT seq, role, kind, text FROM events WHERE session = ? "
                f"AND seq IN ({','.join('?' * len(part))})",
                (owner, *part),
            )
            out.update((seq, (role or kind, text)) for seq, role, kind, text in rows)
    return out


def keep_export(
    store: Store, digest: str, data: bytes, first: str = "", messages: list[Message] | None = None
) -> None:
    """Keep the newest exports' bytes (and the first line and messages they
    were rendered from, for ``export_split``): the edit recorded and taken next
    reads them."""
    # the last: its text and split, once made
    store.fact("exports", 2).keep(digest, [data, first, messages, None])


def file_bytes(store: Store, digest: str) -> bytes | None:
    """Any blob's bytes, a file edit's and a re-rendered export's included."""
    return store.blob(digest, bases=lambda d: _rendered(store, d))


def export_digests(store: Store, prefix: str) -> list[str]:
    """Digests of exports (of any session) starting with ``prefix``."""
    found = []
    for sid, seq in store.read("SELECT session, seq FROM events WHERE kind = 'export'"):
        e = store.event(sid, seq)
        if e is not None and str(e.payload.get("blob", "")).startswith(prefix):
            found.append(e.payload["blob"])
    return found


def _rendered(store: Store, digest: str) -> bytes | None:
    for sid, seq in store.read("SELECT session, seq FROM events WHERE kind = 'export'"):
        e = store.event(sid, seq)
        if e is not None and e.payload.get("blob") == digest:
            return export_bytes(store, e)
    return None
