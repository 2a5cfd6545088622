"""Raw MIME into ParsedMail: each sample .eml, damaged parts, non-MIME input and the bounds."""

from __future__ import annotations

import base64
import struct
import time
import zlib
from pathlib import Path

import pytest
from tenure.triggers.inbound import mime
from tenure.triggers.inbound.mime import MAX_ATTACHMENTS, MAX_BODY_CHARS, html_to_text, parse_mail

EMAIL = Path(__file__).resolve().parents[2] / "samplesources" / "email"


def _sample(name: str) -> mime.ParsedMail:
    return parse_mail((EMAIL / name).read_bytes())


def test_plain_text_mail() -> None:
    mail = _sample("plain-text.eml")
    assert mail.message_id == "<20261130064150.8842.ops-alert@partners.example.com>"
    assert mail.from_address == "maria.okafor@partners.example.com"  # lowercased
    assert mail.from_name == "Maria Okafor"
    assert mail.to == ("ops@inbound.tenure.example",)
    assert mail.cc == ()
    assert mail.subject == "Nightly export failed on host db-7"
    assert mail.body.startswith("Hello,\n\nThe nightly export on db-7 stopped at 03:12")
    assert mail.body.endswith("Thanks,\nMaria")
    assert "\r" not in mail.body
    assert mail.attachments == () and mail.warnings == ()


def test_html_only_mail_becomes_text_without_tags_scripts_or_styles() -> None:
    mail = _sample("html-only.eml")
    assert mail.from_address == "noreply@status.vendor.example"
    assert mail.from_name == "Vendor Status"
    assert mail.cc == ("oncall@tenure.example",)
    assert mail.body == (
        "Incident resolved\n\n"
        "Latency for API requests in eu-west-1 is back to normal & errors have stopped.\n\n"
        "Impact window: 05:58\u201306:41 UTC.\nAffected: <5% of requests.\n\n"
        "Root cause: a faulty cache node\nFix: node replaced"
    )
    assert (
        "track" not in mail.body and "color" not in mail.body and "Status update" not in mail.body
    )


def test_multipart_mail_prefers_the_plain_part_and_keeps_both_attachments() -> None:
    mail = _sample("multipart-attachments.eml")
    assert mail.subject == "Invoice 2026-1184 and delivery photo"
    assert mail.to == ("invoices@inbound.tenure.example", "accounts@tenure.example")
    assert mail.body == (
        "Please find invoice 2026-1184 attached, with a photo of the delivered pallet.\n"
        "Payment is due within 30 days."
    )
    pdf, png = mail.attachments
    assert (pdf.filename, pdf.content_type) == ("invoice-2026-1184.pdf", "application/pdf")
    assert pdf.content.startswith(b"%PDF-1.4") and pdf.content.rstrip().endswith(b"%%EOF")
    assert pdf.byte_size == len(pdf.content) == 592
    assert (png.filename, png.content_type) == ("pallet.png", "image/png")
    assert png.content.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", png.content[16:24])
    assert (width, height, png.byte_size) == (4, 4, len(png.content))
    assert mail.warnings == ()


def test_encoded_word_subject_and_display_name_are_decoded() -> None:
    mail = _sample("encoded-subject.eml")
    assert mail.subject == "Lieferung verz\u00f6gert \u2013 Bestellung Nr. 4417"
    assert mail.from_name == "J\u00fcrgen M\u00fcller"
    assert mail.from_address == "jurgen@lieferant.example.de"
    assert "die Lieferung f\u00fcr Bestellung Nr. 4417" in mail.body  # quoted-printable UTF-8
    assert mail.body.endswith("Gr\u00fc\u00dfe\nJ\u00fcrgen")


def test_reply_keeps_its_quoted_text() -> None:
    mail = _sample("reply-quoted.eml")
    assert mail.subject == "Re: Nightly export failed on host db-7"
    assert mail.cc == ("maria.okafor@partners.example.com",)
    assert mail.body.splitlines()[0] == "Quota raised to 2 TB; rerunning the export now."
    assert '> The nightly export on db-7 stopped at 03:12 with "disk quota exceeded".' in mail.body


def test_damaged_parts_are_kept_with_what_decoded_and_named_in_warnings() -> None:
    mail = _sample("damaged-parts.eml")
    assert mail.body == "Scan finished: 1 page."
    (scan,) = mail.attachments
    assert scan.filename == "scan-0042.bin"
    assert scan.content.startswith(b"Hello wo")
    assert mail.warnings == (
        "body: unknown charset 'x-scanner-8'; read as UTF-8",
        "attachment scan-0042.bin: base64 is damaged; kept what decoded",
    )


def test_bytes_invalid_in_the_declared_charset_are_replaced_and_warned() -> None:
    raw = b"Subject: s\nContent-Type: text/plain; charset=utf-8\n\ncaf\xe9 ok\n"
    mail = parse_mail(raw)
    assert mail.body == "caf\ufffd ok"
    assert mail.warnings == ("body: bytes not valid utf-8; replaced",)


def test_an_unknown_charset_in_an_encoded_word_subject_is_kept_and_warned() -> None:
    mail = parse_mail(b"Subject: =?x-bogus?Q?caf=E9?= menu\nFrom: a@b.example\n\nhi\n")
    assert mail.subject.endswith("menu")
    assert any(w.startswith("subject header") for w in mail.warnings)


@pytest.mark.parametrize(
    "raw",
    [
        b"just some words, no headers at all\nsecond line\n",
        b"",
        b"\x00\xff\xfe garbage \r\n\r\n\x80",
        b"From: nobody\n",
    ],
)
def test_input_that_is_not_mime_still_parses(raw: bytes) -> None:
    mail = parse_mail(raw)
    assert isinstance(mail.body, str)
    assert mail.attachments == ()


def test_text_without_headers_becomes_the_body() -> None:
    mail = parse_mail(b"just some words, no headers at all\nsecond line\n")
    assert mail.body == "just some words, no headers at all\nsecond line"
    assert (mail.subject, mail.from_address, mail.message_id) == ("", "", None)


def test_an_unreadable_from_header_leaves_the_address_empty_with_a_warning() -> None:
    mail = parse_mail(b"From: not an address at all\nSubject: x\n\nbody\n")
    assert mail.from_address == ""
    assert "from header holds no readable address" in mail.warnings


def test_unnamed_attachment_gets_a_name_from_its_type_and_paths_are_stripped() -> None:
    raw = (
        b"Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nhi\n"
        b"--b\nContent-Type: image/png\nContent-Transfer-Encoding: base64\n\n"
        + base64.b64encode(b"\x89PNG fake")
        + b"\n--b\nContent-Type: application/pdf\n"
        b'Content-Disposition: attachment; filename="../../etc/passwd.pdf"\n\n%PDF-\n--b--\n'
    )
    first, second = parse_mail(raw).attachments
    assert first.filename == "attachment-1.png" and first.content == b"\x89PNG fake"
    assert second.filename == "passwd.pdf"


def test_rfc2231_filename_is_decoded() -> None:
    raw = (
        b"Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nhi\n"
        b"--b\nContent-Type: application/octet-stream\n"
        b"Content-Disposition: attachment; filename*=UTF-8''Rechnung%20M%C3%A4rz.txt\n\nx\n--b--\n"
    )
    (attachment,) = parse_mail(raw).attachments
    assert attachment.filename == "Rechnung M\u00e4rz.txt"


def test_a_forwarded_message_is_one_attachment() -> None:
    raw = (
        b"Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nFYI\n"
        b"--b\nContent-Type: message/rfc822\n\nSubject: inner\nFrom: x@y.example\n\ninner body\n"
        b"--b--\n"
    )
    mail = parse_mail(raw)
    assert mail.body == "FYI"
    (forwarded,) = mail.attachments
    assert forwarded.content_type == "message/rfc822"
    assert forwarded.filename == "attachment-1.eml"
    assert b"inner body" in forwarded.content


def test_attachments_beyond_the_bound_are_dropped_and_counted() -> None:
    parts = b"".join(
        b"--b\nContent-Type: application/octet-stream\n"
        b'Content-Disposition: attachment; filename="f%d.bin"\n\nx\n' % i
        for i in range(MAX_ATTACHMENTS + 3)
    )
    mail = parse_mail(b"Content-Type: multipart/mixed; boundary=b\n\n" + parts + b"--b--\n")
    assert len(mail.attachments) == MAX_ATTACHMENTS
    assert mail.attachments[-1].filename == f"f{MAX_ATTACHMENTS - 1}.bin"
    assert f"3 attachments beyond {MAX_ATTACHMENTS} dropped" in mail.warnings


def test_a_body_beyond_the_bound_is_cut_and_warned() -> None:
    raw = b"Subject: long\n\n" + b"a" * (MAX_BODY_CHARS + 10)
    mail = parse_mail(raw)
    assert len(mail.body) == MAX_BODY_CHARS
    assert f"body cut to {MAX_BODY_CHARS} characters from {MAX_BODY_CHARS + 10}" in mail.warnings


def test_deep_nesting_is_bounded() -> None:
    depth = mime.MAX_DEPTH + 5
    raw = b"".join(
        b"Content-Type: multipart/mixed; boundary=b%d\n\n--b%d\n" % (i, i) for i in range(depth)
    )
    raw += b"Content-Type: text/plain\n\ndeep\n"
    mail = parse_mail(raw)
    assert mail.body == ""
    assert f"parts nested deeper than {mime.MAX_DEPTH} levels were not read" in mail.warnings


def test_compressed_looking_payloads_are_not_inflated() -> None:
    # An attachment is carried as the bytes sent, whatever they claim to be.
    blob = zlib.compress(b"0" * 10_000)
    raw = (
        b"Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: application/zip\n"
        b"Content-Transfer-Encoding: base64\n\n" + base64.b64encode(blob) + b"\n--b--\n"
    )
    (attachment,) = parse_mail(raw).attachments
    assert attachment.content == blob


@pytest.mark.parametrize(
    ("html", "text"),
    [
        ("<p>one</p><p>two</p>", "one\n\ntwo"),
        ("a<br>b<br/>c", "a\nb\nc"),
        ("<div>x &lt;y&gt; &amp;amp; &#233;</div>", "x <y> &amp; \u00e9"),
        ("<style>p{}</style><script>alert(1)</script>visible", "visible"),
        ("<p>  spaced \n\n  out  </p>", "spaced out"),
        ("<table><tr><td>a</td><td>b</td></tr><tr><td>c</td></tr></table>", "a b\nc"),
        ("<pre>keep\n  this</pre>", "keep\nthis"),
        ("unclosed <b>bold", "unclosed bold"),
    ],
)
def test_html_to_text(html: str, text: str) -> None:
    assert html_to_text(html) == text


@pytest.mark.parametrize(
    ("raw", "warning"),
    [
        (
            b"From: ceo@bank.example\nFrom: mallory@evil.example\nSubject: x\n\nbody\n",
            "2 From headers; none is read as the sender",
        ),
        (
            b"From: ceo@bank.example, Mallory <mallory@evil.example>\nSubject: x\n\nbody\n",
            "from header names 2 addresses; none is read as the sender",
        ),
        (
            b"From: team: ceo@bank.example, mallory@evil.example;\nSubject: x\n\nbody\n",
            "from header names 2 addresses; none is read as the sender",
        ),
        # An address written as a display name: the parser reads the first and drops the real
        # one, where a DMARC check may judge the domain in angle brackets.
        (
            b"From: ceo@bank.example <mallory@evil.example>\nSubject: x\n\nbody\n",
            "from header holds no single readable address",
        ),
        (
            b'From: "ceo@bank.example" <<>>\nSubject: x\n\nbody\n',
            "from header holds no readable address",
        ),
    ],
    ids=["two-headers", "two-addresses", "a-group", "address-as-name", "no-addr-spec"],
)
def test_a_from_that_does_not_name_one_sender_plainly_names_none(raw: bytes, warning: str) -> None:
    mail = parse_mail(raw)
    assert (mail.from_address, mail.from_name) == ("", "")
    assert warning in mail.warnings


@pytest.mark.parametrize(
    ("header", "name", "address"),
    [
        (b"Maria Okafor <Maria@Partners.Example>", "Maria Okafor", "maria@partners.example"),
        (b"maria@partners.example (Maria)", "", "maria@partners.example"),
        (b"Dr. M. Okafor <maria@partners.example>", "Dr. M. Okafor", "maria@partners.example"),
        (b'"Okafor, Maria" <maria@partners.example>', "Okafor, Maria", "maria@partners.example"),
        (
            b"=?utf-8?q?ceo=40bank=2Eexample?= <m@evil.example>",
            "ceo@bank.example",
            "m@evil.example",
        ),
    ],
)
def test_a_from_naming_one_sender_is_read(header: bytes, name: str, address: str) -> None:
    mail = parse_mail(b"From: " + header + b"\nSubject: x\n\nbody\n")
    assert (mail.from_name, mail.from_address, mail.warnings) == (name, address, ())


HEADERS = b"From: a@b.example\r\nTo: ops@inbound.tenure.example\r\nSubject: s\r\n"


# Codecs Python has that are no text encoding (bytes to bytes, or text to text), and a name
# no codec has: the part is read as UTF-8, and the warning says why.
@pytest.mark.parametrize("charset", [b"rot13", b"base64", b"hex", b"zlib", b"uu", b"x\x00"])
def test_a_charset_that_is_no_text_encoding_is_read_as_utf_8_and_warned(charset: bytes) -> None:
    raw = HEADERS + b'Content-Type: text/plain; charset="' + charset + b'"\r\n\r\nhello'
    mail = parse_mail(raw)
    assert mail.body == "hello"
    assert any("charset" in w for w in mail.warnings), mail.warnings


# Text encodings the bytes are not valid in, or that raise errors of their own kinds.
@pytest.mark.parametrize("charset", [b"utf-16", b"punycode", b"idna"])
def test_bytes_a_text_encoding_cannot_read_are_replaced_not_raised(charset: bytes) -> None:
    raw = HEADERS + b'Content-Type: text/plain; charset="' + charset + b'"\r\n\r\n\xff-\xff..'
    mail = parse_mail(raw)
    assert mail.body and mail.subject == "s"


# --- work bounded before the standard library parses -------------------------------------------


def _timed(raw: bytes) -> tuple[mime.ParsedMail, float]:
    """The mail parsed, and the CPU seconds the parse took: the work a bound keeps small,
    whatever else the machine runs meanwhile (a wall clock on a busy machine measured others'
    work too, up to seven times this)."""
    started = time.thread_time()
    mail = parse_mail(raw)
    return mail, time.thread_time() - started


# The parser reads a bare CR as a line end too: a count of lines must see them the same way.
@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
def test_a_mail_of_very_many_parts_is_cut_before_the_parser_builds_them(end: bytes) -> None:
    # 40,000 parts in 320 KB kept the parser busy for seconds; 380,000 for minutes.
    raw = b"Content-Type: multipart/mixed; boundary=b" + end + end
    raw += (b"--b" + end + end + b"x" + end) * 40_000 + b"--b--" + end
    mail, seconds = _timed(raw)
    assert seconds < 3, seconds
    assert mail.body == "x"
    assert any(
        w.startswith("mail cut at byte ") and f"{mime.MAX_STRUCTURE_LINES} boundary" in w
        for w in mail.warnings
    ), mail.warnings
    assert f"parts beyond the first {mime.MAX_PARTS} were not read" in mail.warnings


def test_structure_lines_below_the_bound_are_all_read() -> None:
    raw = b"Content-Type: multipart/mixed; boundary=b\n\n"
    raw += b"--b\nContent-Type: text/plain\n\nx\n" * (mime.MAX_PARTS - 2) + b"--b--\n"
    mail = parse_mail(raw)
    assert mail.body == "x" and mail.warnings == ()


@pytest.mark.parametrize("name", ["To", "Cc"])
def test_an_address_header_of_very_many_addresses_is_read_from_a_cut_copy(name: str) -> None:
    # Reading an address list costs the square of its length: 32,000 addresses took 10 s.
    many = ",\r\n ".join(f"u{n}@example.com" for n in range(20_000))
    raw = f"From: a@b.example\r\n{name}: ops@in.example, {many}\r\nSubject: s\r\n\r\nhi".encode()
    mail, seconds = _timed(raw)
    assert seconds < 2, seconds
    read = mail.to if name == "To" else mail.cc
    assert read[:2] == ("ops@in.example", "u0@example.com")
    assert 1000 < len(read) < 20_000
    assert all(a.endswith("@example.com") for a in read[1:])  # no address cut in half
    header = name.lower()
    assert any(
        w.startswith(f"{header} header cut to {mime.MAX_ADDRESS_HEADER_CHARS} characters from ")
        for w in mail.warnings
    ), mail.warnings


@pytest.mark.parametrize(
    "header",
    [
        "N" * (mime.MAX_ADDRESS_HEADER_CHARS + 1) + " <a@b.example>",
        ", ".join(f"u{n}@example.com" for n in range(20_000)),
    ],
    ids=["long-name", "many-addresses"],
)
def test_a_from_header_longer_than_any_sender_names_none(header: str) -> None:
    mail, seconds = _timed(f"From: {header}\r\nSubject: s\r\n\r\nhi".encode())
    assert seconds < 2, seconds
    assert (mail.from_address, mail.from_name) == ("", "")
    assert (
        f"from header longer than {mime.MAX_ADDRESS_HEADER_CHARS} characters; "
        "not read as the sender"
    ) in mail.warnings


def test_a_message_id_is_cut_to_the_longest_line_mail_allows() -> None:
    raw = b"Message-ID: <" + b"m" * 5000 + b"@x.example>\r\nSubject: s\r\n\r\nhi"
    mail = parse_mail(raw)
    assert mail.message_id == "<" + "m" * (mime.MAX_MESSAGE_ID_CHARS - 1)
    assert f"message-id header cut to {mime.MAX_MESSAGE_ID_CHARS} characters from 5012" in (
        mail.warnings
    )


def test_a_subject_of_very_many_encoded_words_is_read_from_a_cut_copy() -> None:
    # Encoded words cost the square of their number to decode: 36,000 took 36 s.
    words = "\r\n ".join("=?utf-8?q?a=C3=A9?=" for _ in range(20_000))
    mail, seconds = _timed(f"From: a@b.example\r\nSubject: {words}\r\n\r\nhi".encode())
    assert seconds < 2, seconds
    assert mail.subject.startswith("aéaé") and len(mail.subject) > 2000
    assert any(
        w.startswith(f"subject header cut to {mime.MAX_ADDRESS_HEADER_CHARS} characters from ")
        for w in mail.warnings
    ), mail.warnings


def _nested_multipart(levels: int) -> bytes:
    raw = b"From: A <a@b.example>\nTo: ops@in.example\nSubject: deep\nMessage-ID: <d@b.example>\n"
    raw += b"".join(
        b"Content-Type: multipart/mixed; boundary=b%d\n\n--b%d\n" % (i, i) for i in range(levels)
    )
    return raw + b"Content-Type: text/plain\n\ndeep\n"


def _nested_messages(levels: int) -> bytes:
    raw = b"From: A <a@b.example>\nTo: ops@in.example\nSubject: deep\nMessage-ID: <d@b.example>\n"
    raw += b"Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nb\n--b\n"
    raw += b"Content-Type: message/rfc822\n\n" * levels
    return raw + b"Subject: in\n\ninner\n--b--\n"


# Deep enough that the standard library's parser, or its writer, recurses past Python's limit.
@pytest.mark.parametrize(
    "raw",
    [_nested_multipart(1500), _nested_messages(2000)],
    ids=["multipart", "message-rfc822"],
)
def test_parts_nested_past_what_python_can_recurse_leave_the_headers_read(raw: bytes) -> None:
    mail, seconds = _timed(raw)
    assert seconds < 5, seconds
    assert (mail.from_name, mail.from_address, mail.to) == ("A", "a@b.example", ("ops@in.example",))
    assert (mail.subject, mail.message_id) == ("deep", "<d@b.example>")
    assert (mail.body, mail.attachments) == ("", ())
    assert "the parts nest too deep to read: the headers alone were read" in mail.warnings


def test_an_attachment_type_longer_than_any_media_type_is_read_as_octet_stream() -> None:
    long_type = b"application/" + b"x" * 3000
    raw = (
        b"Content-Type: multipart/mixed; boundary=b\n\n--b\nContent-Type: text/plain\n\nbody\n"
        b"--b\nContent-Type: " + long_type + b'\nContent-Disposition: attachment; filename="f"\n'
        b"\nx\n--b--\n"
    )
    (attachment,) = parse_mail(raw).attachments
    assert attachment.content_type == "application/octet-stream"
    assert "attachment f: content type of 3012 characters read as application/octet-stream" in (
        parse_mail(raw).warnings
    )


@pytest.mark.parametrize(
    ("name", "opening"),
    [
        (b"Content-Type", b'Content-Type: application/x; name="'),
        (b"content-disposition", b'Content-Type: application/x\r\ncontent-disposition: file; x="'),
    ],
)
def test_a_part_header_of_very_many_words_is_cut_before_the_parser_reads_it(
    name: bytes, opening: bytes
) -> None:
    # The parser reads a part's type and disposition in time growing with the square of
    # their length, several times a part: 16,000 encoded words (312 KB) took 27 s.
    words = b" ".join(b"=?utf-8?q?a=C3=A9?=" for _ in range(16_000))
    raw = (
        b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n"
        b"\r\nbody\r\n--b\r\n" + opening + words + b'"\r\n\r\nx\r\n--b--\r\n'
    )
    mail, seconds = _timed(raw)
    assert seconds < 3, seconds
    assert mail.body == "body" and len(mail.attachments) == 1
    assert any(
        w.startswith(f"{name.decode().lower()} header of ")
        and w.endswith(f"cut to {mime.MAX_PART_HEADER_CHARS} characters")
        for w in mail.warnings
    ), mail.warnings


def test_parts_whose_types_together_are_too_long_to_read_are_cut_before_the_parser_reads_them() -> (
    None
):
    # Each under the bound of one header, together they took seconds: every question asked
    # of a part (its type, its disposition, its name) parses them again.
    words = b" ".join(b"=?utf-8?q?a=C3=A9?=" for _ in range(50))
    part = b'--b\r\nContent-Type: application/x; name="' + words + b'"\r\n\r\nx\r\n'
    raw = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n" + part * 300 + b"--b--\r\n"
    mail, seconds = _timed(raw)
    assert seconds < 3, seconds
    assert 0 < len(mail.attachments) <= mime.MAX_ATTACHMENTS
    assert any(
        w.endswith(
            f"its Content-Type and Content-Disposition headers pass {mime.MAX_PART_HEADERS_CHARS} "
            "characters"
        )
        for w in mail.warnings
    ), mail.warnings


def test_a_part_header_cut_keeps_its_end_where_a_file_name_ends_and_a_boundary_is_named() -> None:
    # What follows a long parameter is kept: the file name's own ending (its extension), and
    # a boundary named after a long parameter, without which the parts could not be told.
    name = "%C3%A9" * 2500 + ".pdf"  # a 2,504-character name, 15,004 characters encoded
    pad = "x" * 6000
    raw = (
        f'Content-Type: multipart/mixed; x-pad="{pad}"; boundary=zz\r\n\r\n'
        "--zz\r\nContent-Type: text/plain\r\n\r\nbody\r\n"
        "--zz\r\nContent-Type: application/pdf\r\n"
        f"Content-Disposition: attachment; filename*=UTF-8''{name}\r\n\r\n%PDF\r\n--zz--\r\n"
    ).encode()
    mail, seconds = _timed(raw)
    assert seconds < 3, seconds
    assert mail.body == "body"
    (attachment,) = mail.attachments
    assert attachment.filename.endswith("é.pdf") and len(attachment.filename) <= 255
    assert any("cut to" in w for w in mail.warnings), mail.warnings
