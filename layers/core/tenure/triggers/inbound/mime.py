"""Raw MIME → ParsedMail with the standard library's ``email`` package, never failing whole.

A mail from the internet is hostile input. Parsing keeps going past every fault it can: a part
that will not decode (bad base64, an unknown charset, a header the parser chokes on) is kept
with what could be decoded, and ``warnings`` names what failed. Only the bounds below cut
anything, and each cut is named in ``warnings`` too:

* ``MAX_ATTACHMENTS`` (20) attachments are kept, in document order; the rest are dropped.
* ``MAX_BODY_CHARS`` (100 000) characters of body text are kept.
* ``MAX_PARTS`` (500) MIME parts are visited and ``MAX_DEPTH`` (20) levels of nesting are
  entered, so a crafted mail cannot make the walk run long.

The size of the raw mail itself is bounded before it gets here: SES refuses mail over 40 MB.
Within that, the standard library's own work is bounded before it starts, since it builds
every part and reads some headers in time that grows with the square of their length:

* The raw mail is cut before the ``MAX_STRUCTURE_LINES``-th (5 000) line that opens with
  ``--`` or ``Content-Type:``, ten for each part the walk may visit: 380 000 tiny parts
  (13.7 MB) took the parser minutes.
* Each Content-Type and Content-Disposition header is cut to ``MAX_PART_HEADER_CHARS``
  (4 000: its first and last 2 000), and the mail is cut where they pass
  ``MAX_PART_HEADERS_CHARS`` (256 000) together: the parser reads them again for every
  question asked of a part, and one of 312 KB took it half a minute.
* A To, Cc or Subject header longer than ``MAX_ADDRESS_HEADER_CHARS`` (what 100 addresses of
  320 characters need) is read from a copy cut to that length — To and Cc with the lenient
  splitter, whose time grows with the length alone. A From header that long names no sender.
* The Message-ID is cut to ``MAX_MESSAGE_ID_CHARS`` (998), the longest line a mail may have.
"""

from __future__ import annotations

import email
import email.policy
import email.utils
import mimetypes
import re
from collections.abc import Iterator
from email.errors import (
    InvalidBase64CharactersDefect,
    InvalidBase64LengthDefect,
    InvalidBase64PaddingDefect,
    ObsoleteHeaderDefect,
)
from email.headerregistry import Address
from email.message import Message
from email.parser import BytesHeaderParser
from html.parser import HTMLParser
from itertools import islice
from typing import Any

from tenure.records import record

MAX_ATTACHMENTS = 20
MAX_BODY_CHARS = 100_000
MAX_PARTS = 500
MAX_DEPTH = 20
MAX_FILENAME_CHARS = 255
# A media type's longest: 127 characters each for its type and subtype, and the slash.
MAX_CONTENT_TYPE_CHARS = 255
MAX_STRUCTURE_LINES = 10 * MAX_PARTS
# An addr-spec's longest, in the octets SMTP counts: 64 for the local part, "@", 255 for the
# domain. Anything longer is no address that a mail can be delivered to or from.
MAX_ADDRESS_BYTES = 320
MAX_ADDRESS_HEADER_CHARS = 100 * (MAX_ADDRESS_BYTES + len(", "))
MAX_MESSAGE_ID_CHARS = 998
# A part's Content-Type or Content-Disposition: room for a 255-character file name, encoded.
MAX_PART_HEADER_CHARS = 4000
# All of them in one mail: the parser reads each again for every question asked of its part.
MAX_PART_HEADERS_CHARS = 256_000

# A line the parser may read as a boundary or a part's type, with the line end before it (a
# bare CR ends a line too), searched for in the mail after one more line end: anchored on a
# character, the search scans megabytes of base64 four times faster than on "^".
_STRUCTURE_LINE = re.compile(rb"[\r\n](?:--|content-type:)", re.IGNORECASE)
# A part's type or disposition, folded lines and all: the parser reads each in time growing
# with the square of its length, and reads it again for every question asked of the part.
_PART_HEADER = re.compile(
    rb"[\r\n](content-type|content-disposition)[ \t]*:[^\r\n]*"
    rb"(?:(?:\r\n|\r|\n)[ \t][^\r\n]*)*",
    re.IGNORECASE,
)
# The longest a header is read, by name (From: see _sender); the rest is cut, with a warning.
_HEADER_BOUNDS = {
    "to": MAX_ADDRESS_HEADER_CHARS,
    "cc": MAX_ADDRESS_HEADER_CHARS,
    "subject": MAX_ADDRESS_HEADER_CHARS,
    "message-id": MAX_MESSAGE_ID_CHARS,
}

_BASE64_DEFECTS = (
    InvalidBase64CharactersDefect,
    InvalidBase64LengthDefect,
    InvalidBase64PaddingDefect,
)


@record
class MailAttachment:
    filename: str
    content_type: str
    byte_size: int
    content: bytes


@record
class ParsedMail:
    message_id: str | None  # the Message-ID header as written (with its angle brackets)
    from_address: str  # lowercased addr-spec of the From header's one address; "" if not one
    from_name: str  # its display name, decoded; "" when none
    to: tuple[str, ...]  # lowercased addr-specs, in header order
    cc: tuple[str, ...]
    subject: str  # encoded-words decoded; "" when absent
    body: str  # the text/plain part, else text made from the HTML part; "" when neither
    attachments: tuple[MailAttachment, ...]
    warnings: tuple[str, ...]  # what could not be decoded or was cut, one line each


def parse_mail(raw: bytes) -> ParsedMail:
    """Parse raw RFC 5322 bytes; never raises for content (see the module docstring).

    Parts nested deeper than Python can recurse (a thousand multiparts, or two thousand
    forwarded messages, in a few dozen KB) make the standard library's parser or writer raise
    RecursionError; the mail is then read for its headers alone, so it still files its task.
    """
    warnings: list[str] = []
    raw = _bounded(raw, warnings)
    read = list(warnings)
    try:
        message = email.message_from_bytes(raw, policy=email.policy.default)
        body, attachments = _contents(message, read)
        return _with_headers(message, read, body, attachments)
    except RecursionError:
        warnings.append("the parts nest too deep to read: the headers alone were read")
        headers = BytesHeaderParser(policy=email.policy.default).parsebytes(raw)
        return _with_headers(headers, warnings, "", ())


def _contents(message: Message, warnings: list[str]) -> tuple[str, tuple[MailAttachment, ...]]:
    """The body and the attachments of the parsed mail."""
    parts = list(_leaves(message, warnings))
    plain = next((p for p in parts if _is_body(p, "text/plain")), None)
    html = next((p for p in parts if _is_body(p, "text/html")), None)
    if plain is not None:
        body = _text(plain, "body", warnings).rstrip()
    elif html is not None:
        body = html_to_text(_text(html, "body", warnings))
    else:
        body = ""
    if len(body) > MAX_BODY_CHARS:
        warnings.append(f"body cut to {MAX_BODY_CHARS} characters from {len(body)}")
        body = body[:MAX_BODY_CHARS]

    attachments: list[MailAttachment] = []
    candidates = [p for p in parts if p is not plain and p is not html and _is_attachment(p)]
    for index, part in enumerate(candidates[:MAX_ATTACHMENTS], 1):
        attachments.append(_attachment(part, index, warnings))
    if len(candidates) > MAX_ATTACHMENTS:
        warnings.append(
            f"{len(candidates) - MAX_ATTACHMENTS} attachments beyond {MAX_ATTACHMENTS} dropped"
        )
    return body, tuple(attachments)


def _with_headers(
    message: Message, warnings: list[str], body: str, attachments: tuple[MailAttachment, ...]
) -> ParsedMail:
    from_name, from_address = _sender(message, warnings)
    return ParsedMail(
        message_id=_header_text(message, "message-id", warnings).strip() or None,
        from_address=from_address,
        from_name=from_name,
        to=_addresses(message, "to", warnings),
        cc=_addresses(message, "cc", warnings),
        subject=_header_text(message, "subject", warnings),
        body=body,
        attachments=attachments,
        warnings=tuple(warnings),
    )


# --- headers ----------------------------------------------------------------------------------


def _bounded(raw: bytes, warnings: list[str]) -> bytes:
    """`raw`, cut before its MAX_STRUCTURE_LINES-th structure line, each part's type and
    disposition cut to MAX_PART_HEADER_CHARS, and cut where those pass MAX_PART_HEADERS_CHARS
    together; each cut named in `warnings`."""
    # Each match starts at the line end before its line: in `raw`, where the line starts.
    lined = b"\n" + raw
    beyond = next(islice(_STRUCTURE_LINE.finditer(lined), MAX_STRUCTURE_LINES, None), None)
    if beyond is not None:
        warnings.append(
            f"mail cut at byte {beyond.start()}: more than {MAX_STRUCTURE_LINES} boundary and "
            "Content-Type lines"
        )
        raw = raw[: beyond.start()]
        lined = lined[: beyond.start() + 1]
    pieces: list[bytes] = []
    at = 0
    spent = 0
    cut: dict[str, list[int]] = {}
    for found in _PART_HEADER.finditer(lined):
        field, start, end = found[0][1:], found.start(), found.end() - 1
        if len(field) > MAX_PART_HEADER_CHARS:
            cut.setdefault(found[1].decode().lower(), []).append(len(field))
            # Its beginning and its end, the middle left out: what follows a long parameter
            # (a boundary named last, a file name's extension) is kept. No line end is left
            # at either side of the cut: a second one would end the part's headers there.
            half = MAX_PART_HEADER_CHARS // 2
            field = field[:half].rstrip(b"\r\n \t") + field[-half:].lstrip(b"\r\n")
        spent += len(field)
        pieces.append(raw[at:start])
        at = end
        if spent > MAX_PART_HEADERS_CHARS:
            warnings.append(
                f"mail cut at byte {start}: its Content-Type and Content-Disposition "
                f"headers pass {MAX_PART_HEADERS_CHARS} characters"
            )
            at = len(raw)
            break
        pieces.append(field)
    pieces.append(raw[at:])
    for name, lengths in cut.items():
        many = (
            f"{len(lengths)} {name} headers, the longest" if len(lengths) > 1 else f"{name} header"
        )
        warnings.append(
            f"{many} of {max(lengths)} characters cut to {MAX_PART_HEADER_CHARS} characters"
        )
    return b"".join(pieces)


def _header(message: Message, name: str, warnings: list[str]) -> Any:
    """The parsed header, or its raw text when the stdlib parser fails on it.

    The header parser has known crash bugs on malformed input (IndexError, AttributeError,
    …); the mail is still worth reading, so the failure becomes a warning, not an exception.
    A header longer than its bound (_HEADER_BOUNDS) is read from a cut copy: see _cut_header.
    """
    bound = _HEADER_BOUNDS.get(name)
    raw = _raw_header(message, name) if bound else None
    if bound and raw is not None and len(raw) > bound:
        warnings.append(f"{name} header cut to {bound} characters from {len(raw)}")
        return _cut_header(message, name, raw[:bound])
    try:
        value = message.get(name)
    except Exception as exc:  # see docstring: recorded in warnings, never hidden
        warnings.append(f"{name} header could not be parsed ({type(exc).__name__})")
        return _raw_header(message, name)
    # An encoded-word in an unknown charset, or undecodable bytes, come back as U+FFFD.
    if (
        value is not None
        and "\ufffd" in str(value)
        and "\ufffd" not in (_raw_header(message, name) or "")
    ):
        warnings.append(f"{name} header has undecodable text (replaced)")
    return value


def _cut_header(message: Message, name: str, cut: str) -> Any:
    """A header's cut copy: an address list as text, for _address_list's lenient splitter,
    without the address the cut went through; a Subject decoded, to its last whole word."""
    if name in ("to", "cc"):
        return cut.rpartition(",")[0] or cut
    if name == "subject":
        # Unfolded as the policy unfolds a header it fetches, so encoded words join up.
        cut = "".join(cut.rsplit(None, 1)[0].splitlines()) if cut.strip() else cut
        try:
            return message.policy.header_factory(name, cut)  # type: ignore[attr-defined]
        except Exception:  # the same parser faults as _header's, on a copy: its raw text
            return cut
    return cut


def _raw_header(message: Message, name: str) -> str | None:
    for key, value in message.raw_items():
        if key.lower() == name:
            return str(value)
    return None


def _header_text(message: Message, name: str, warnings: list[str]) -> str:
    value = _header(message, name, warnings)
    return "" if value is None else " ".join(str(value).split())


def _address_list(message: Message, name: str, warnings: list[str]) -> list[tuple[str, str]]:
    """(display name, lowercased addr-spec) for each address of the header, in order."""
    value = _header(message, name, warnings)
    if value is None:
        return []
    found: list[tuple[str, str]] = []
    addresses: tuple[Address, ...] = getattr(value, "addresses", ())
    for address in addresses:
        if address.username and address.domain:
            found.append((address.display_name, address.addr_spec.strip().lower()))
    if not found and str(value).strip():
        # Unparseable by the modern parser: fall back to the lenient RFC 2822 splitter.
        found = [
            (name_part, spec.strip().lower())
            for name_part, spec in email.utils.getaddresses([str(value)])
            if "@" in spec
        ]
        if not found:
            warnings.append(f"{name} header holds no readable address")
    return found


def _sender(message: Message, warnings: list[str]) -> tuple[str, str]:
    """(display name, lowercased addr-spec) of the one address the one From header names, as
    the standard parser reads it without a fault; ("", "") otherwise, with a warning.

    The sender decides `match.from` under SES's DMARC verdict, which judged the From header as
    SES read it. Where the header could be read more than one way — several From headers,
    several addresses, an address the parser only reached by dropping what it could not read
    (``ceo@bank.example <mallory@evil.example>`` reads as the first, where a DMARC check may
    judge the second) — no address is taken as the sender. No lenient fallback either."""
    count = sum(1 for key, _ in message.raw_items() if key.lower() == "from")
    if count == 0:
        return "", ""
    if count > 1:
        warnings.append(f"{count} From headers; none is read as the sender")
        return "", ""
    if len(_raw_header(message, "from") or "") > MAX_ADDRESS_HEADER_CHARS:
        # Far longer than one address and its name; parsing it could take its length squared.
        warnings.append(
            f"from header longer than {MAX_ADDRESS_HEADER_CHARS} characters; not read as the sender"
        )
        return "", ""
    value = _header(message, "from", warnings)
    addresses: tuple[Address, ...] | None = getattr(value, "addresses", None)
    if addresses is None:  # the parser failed on it: already warned
        return "", ""
    if len(addresses) > 1:
        warnings.append(f"from header names {len(addresses)} addresses; none is read as the sender")
        return "", ""
    readable = [a for a in addresses if a.username and a.domain]
    if not readable:
        if str(value).strip():
            warnings.append("from header holds no readable address")
        return "", ""
    if any(not isinstance(d, ObsoleteHeaderDefect) for d in getattr(value, "defects", ())):
        # One address read, but only past text the parser could not read and let go of.
        warnings.append("from header holds no single readable address")
        return "", ""
    address = readable[0]
    return address.display_name, address.addr_spec.strip().lower()


def _addresses(message: Message, name: str, warnings: list[str]) -> tuple[str, ...]:
    return tuple(spec for _, spec in _address_list(message, name, warnings))


# --- parts ------------------------------------------------------------------------------------


def _leaves(message: Message, warnings: list[str]) -> Iterator[Message]:
    """Leaf parts in document order; a forwarded message (message/rfc822) counts as one leaf."""
    visited = 0
    stack: list[tuple[Message, int]] = [(message, 0)]
    while stack:
        part, depth = stack.pop()
        visited += 1
        if visited > MAX_PARTS:
            warnings.append(f"parts beyond the first {MAX_PARTS} were not read")
            return
        if part.get_content_maintype() == "multipart" and isinstance(part.get_payload(), list):
            if depth >= MAX_DEPTH:
                warnings.append(f"parts nested deeper than {MAX_DEPTH} levels were not read")
                continue
            children = part.get_payload()
            assert isinstance(children, list)
            stack.extend(
                (child, depth + 1) for child in reversed(children) if isinstance(child, Message)
            )
        else:
            yield part


def _is_body(part: Message, content_type: str) -> bool:
    return (
        part.get_content_type() == content_type
        and part.get_content_disposition() != "attachment"
        and not part.get_filename()
    )


def _is_attachment(part: Message) -> bool:
    if part.get_content_disposition() == "attachment" or part.get_filename():
        return True
    # An unnamed inline text part beside the body (a signature, a second alternative) is text
    # of the same mail, not a file; anything else (images, documents, messages) is a file.
    return part.get_content_maintype() != "text"


def _payload_bytes(part: Message, what: str, warnings: list[str]) -> bytes:
    if part.get_content_type() == "message/rfc822" or part.get_content_maintype() == "message":
        inner = part.get_payload()
        if isinstance(inner, list) and inner and isinstance(inner[0], Message):
            return bytes(inner[0].as_bytes(policy=email.policy.default))
    before = len(part.defects)
    payload = part.get_payload(decode=True)
    if any(isinstance(d, _BASE64_DEFECTS) for d in part.defects[before:]):
        warnings.append(f"{what}: base64 is damaged; kept what decoded")
    if isinstance(payload, bytes):
        return payload
    text = part.get_payload()
    return text.encode("utf-8", "surrogateescape") if isinstance(text, str) else b""


def _text(part: Message, what: str, warnings: list[str]) -> str:
    data = _payload_bytes(part, what, warnings)
    charset = part.get_content_charset() or "us-ascii"
    try:
        # A codec that is no text encoding (rot13, base64, zlib…) is one decode() refuses with
        # a LookupError; a name with a NUL in it is a ValueError.
        text = data.decode(charset)
    except (LookupError, ValueError) as err:
        if isinstance(err, UnicodeError):  # the bytes, not the name (punycode's own kinds too)
            warnings.append(f"{what}: bytes not valid {charset[:40]}; replaced")
        else:
            warnings.append(f"{what}: unknown charset {charset[:40]!r}; read as UTF-8")
            charset = "utf-8"
        try:
            text = data.decode(charset, errors="replace")
        except (LookupError, ValueError):
            text = data.decode("utf-8", errors="replace")
    # Mail travels with CRLF line ends; the text handed on uses plain newlines.
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _attachment(part: Message, index: int, warnings: list[str]) -> MailAttachment:
    content_type = part.get_content_type()
    try:
        filename = part.get_filename() or ""
    except Exception as exc:  # a broken RFC 2231 parameter: keep the file, name it ourselves
        warnings.append(f"attachment {index}: filename unreadable ({type(exc).__name__})")
        filename = ""
    filename = _safe_filename(filename)
    if len(content_type) > MAX_CONTENT_TYPE_CHARS:
        # No media type is that long; it would be stored and listed with the file.
        warnings.append(
            f"attachment {filename or index}: content type of {len(content_type)} characters "
            "read as application/octet-stream"
        )
        content_type = "application/octet-stream"
    if not filename:
        extension = ".eml" if content_type == "message/rfc822" else ""
        extension = extension or mimetypes.guess_extension(content_type) or ".bin"
        filename = f"attachment-{index}{extension}"
    content = _payload_bytes(part, f"attachment {filename}", warnings)
    return MailAttachment(filename, content_type, len(content), content)


def _safe_filename(name: str) -> str:
    """The last path segment, without control characters, bounded in length."""
    name = re.split(r"[/\\]", name)[-1]
    name = "".join(ch for ch in name if ch.isprintable()).strip().strip(".")
    return name[-MAX_FILENAME_CHARS:]


# --- HTML to text -----------------------------------------------------------------------------

_PARAGRAPH_TAGS = frozenset(
    {
        "p", "div", "section", "article", "header", "footer", "blockquote", "pre", "table",
        "ul", "ol", "dl", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "address", "figure",
    }
)  # fmt: skip
_LINE_TAGS = frozenset({"br", "li", "tr", "dt", "dd"})
_HIDDEN_TAGS = frozenset({"script", "style", "head", "title", "template", "noscript"})


class _TextMaker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.chunks: list[str] = []
        self.hidden = 0
        self.pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HIDDEN_TAGS:
            self.hidden += 1
        elif tag in _PARAGRAPH_TAGS:
            self.chunks.append("\n\n")
            self.pre += tag == "pre"
        elif tag in _LINE_TAGS:
            self.chunks.append("\n")
        elif tag in ("td", "th"):
            self.chunks.append(" ")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _LINE_TAGS:
            self.chunks.append("\n")
        elif tag in _PARAGRAPH_TAGS:
            self.chunks.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _HIDDEN_TAGS:
            self.hidden = max(0, self.hidden - 1)
        elif tag in _PARAGRAPH_TAGS:
            self.chunks.append("\n\n")
            if tag == "pre":
                self.pre = max(0, self.pre - 1)

    def handle_data(self, data: str) -> None:
        if self.hidden:
            return
        # Outside <pre>, HTML collapses runs of white space (newlines included) to one space.
        self.chunks.append(data if self.pre else re.sub(r"\s+", " ", data))


def html_to_text(html: str) -> str:
    """Readable text from HTML: tags, scripts and styles gone, entities unescaped, paragraphs
    kept as blank lines."""
    maker = _TextMaker()
    maker.feed(html)
    maker.close()
    # convert_charrefs has already unescaped the entities; unescaping again would turn a
    # written "&amp;lt;" into "<".
    text = "".join(maker.chunks)
    lines = [line.strip() for line in text.replace("\xa0", " ").split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
