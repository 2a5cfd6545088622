"""A Java class, assembled here, that starts DynamoDB Local listening on 127.0.0.1 alone.

DynamoDB Local has no option for the address it listens on (`-help` lists none, and no system
property reaches it): its ServerRunner makes Jetty's `Server(port)`, whose one connector binds
every interface. It takes any credentials and any signature, so there it would serve the
table to anyone on the network. This class starts it as ServerRunner does, from the same
command line, and names the connector's host before the server starts:

    public class TenureLoopbackDynamoDBLocal {
        public static void main(String[] args) throws Exception {
            DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
            Field field = DynamoDBProxyServer.class.getDeclaredField("server");
            field.setAccessible(true);
            Server server = (Server) field.get(proxy);
            ((ServerConnector) server.getConnectors()[0]).setHost("127.0.0.1");
            proxy.start();
        }
    }

It is assembled rather than compiled because DynamoDB Local needs a Java runtime only, and a
runtime alone has no compiler. The method has no branch and no handler, so the class needs no
stack map frames, and its bytes are exactly the instructions below. ServerRunner's own main
also sets up DynamoDB Local's telemetry; this one leaves it out, so nothing is sent anywhere.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

MAIN_CLASS = "TenureLoopbackDynamoDBLocal"
HOST = "127.0.0.1"

# The class file format of Java 17: the pinned DynamoDB Local's own classes need Java 17 too.
CLASS_FILE_VERSION = 61
ACC_PUBLIC, ACC_STATIC, ACC_SUPER = 0x0001, 0x0008, 0x0020

SERVER_RUNNER = "software/amazon/dynamodb/services/local/main/ServerRunner"
PROXY_SERVER = "software/amazon/dynamodb/services/local/server/DynamoDBProxyServer"
JETTY_SERVER = "org/eclipse/jetty/server/Server"
SERVER_CONNECTOR = "org/eclipse/jetty/server/ServerConnector"

# The opcodes used (the JVM specification, chapter 6).
ICONST_0, ICONST_1 = 0x03, 0x04
LDC_W = 0x13
ALOAD_0, ALOAD_1, ALOAD_2 = 0x2A, 0x2B, 0x2C
AALOAD = 0x32
ASTORE_1, ASTORE_2 = 0x4C, 0x4D
RETURN = 0xB1
INVOKEVIRTUAL, INVOKESTATIC = 0xB6, 0xB8
CHECKCAST = 0xC0


class _ConstantPool:
    """The class's constants, each written once; indexes count from 1."""

    def __init__(self) -> None:
        self.entries: dict[bytes, int] = {}

    def _add(self, entry: bytes) -> int:
        return self.entries.setdefault(entry, len(self.entries) + 1)

    def utf8(self, text: str) -> int:
        data = text.encode("ascii")  # modified UTF-8 is ASCII for ASCII text
        return self._add(struct.pack(">BH", 1, len(data)) + data)

    def cls(self, name: str) -> int:
        return self._add(struct.pack(">BH", 7, self.utf8(name)))

    def string(self, text: str) -> int:
        return self._add(struct.pack(">BH", 8, self.utf8(text)))

    def method(self, owner: str, name: str, descriptor: str) -> int:
        name_and_type = self._add(struct.pack(">BHH", 12, self.utf8(name), self.utf8(descriptor)))
        return self._add(struct.pack(">BHH", 10, self.cls(owner), name_and_type))

    def to_bytes(self) -> bytes:
        return struct.pack(">H", len(self.entries) + 1) + b"".join(self.entries)


def class_bytes(host: str = HOST) -> bytes:
    """The class file of TenureLoopbackDynamoDBLocal (the Java above)."""
    pool = _ConstantPool()
    this_class = pool.cls(MAIN_CLASS)
    super_class = pool.cls("java/lang/Object")
    code = _main_code(pool, host)
    max_stack, max_locals = 2, 3  # two operands at most; args, proxy and field
    code_attribute = (
        struct.pack(">HHI", max_stack, max_locals, len(code))
        + code
        + struct.pack(">HH", 0, 0)  # no exception handlers, no attributes
    )
    main = (
        struct.pack(
            ">HHHH",
            ACC_PUBLIC | ACC_STATIC,
            pool.utf8("main"),
            pool.utf8("([Ljava/lang/String;)V"),
            1,  # one attribute: Code
        )
        + struct.pack(">HI", pool.utf8("Code"), len(code_attribute))
        + code_attribute
    )
    head = struct.pack(">IHH", 0xCAFEBABE, 0, CLASS_FILE_VERSION)
    body = struct.pack(">HHHHH", ACC_PUBLIC | ACC_SUPER, this_class, super_class, 0, 0)
    methods = struct.pack(">H", 1) + main
    return head + pool.to_bytes() + body + methods + struct.pack(">H", 0)


def _op(opcode: int, index: int | None = None) -> bytes:
    return bytes([opcode]) if index is None else struct.pack(">BH", opcode, index)


def _main_code(pool: _ConstantPool, host: str) -> bytes:
    """The bytecode of main(String[]), its constants added to `pool` in the order it uses
    them."""
    op = _op
    return b"".join(
        [
            op(ALOAD_0),
            op(
                INVOKESTATIC,
                pool.method(
                    SERVER_RUNNER,
                    "createServerFromCommandLineArgs",
                    f"([Ljava/lang/String;)L{PROXY_SERVER};",
                ),
            ),
            op(ASTORE_1),  # proxy
            op(LDC_W, pool.cls(PROXY_SERVER)),
            op(LDC_W, pool.string("server")),
            op(
                INVOKEVIRTUAL,
                pool.method(
                    "java/lang/Class",
                    "getDeclaredField",
                    "(Ljava/lang/String;)Ljava/lang/reflect/Field;",
                ),
            ),
            op(ASTORE_2),  # field
            op(ALOAD_2),
            op(ICONST_1),
            op(INVOKEVIRTUAL, pool.method("java/lang/reflect/Field", "setAccessible", "(Z)V")),
            op(ALOAD_2),
            op(ALOAD_1),
            op(
                INVOKEVIRTUAL,
                pool.method(
                    "java/lang/reflect/Field", "get", "(Ljava/lang/Object;)Ljava/lang/Object;"
                ),
            ),
            op(CHECKCAST, pool.cls(JETTY_SERVER)),
            op(
                INVOKEVIRTUAL,
                pool.method(
                    JETTY_SERVER, "getConnectors", "()[Lorg/eclipse/jetty/server/Connector;"
                ),
            ),
            op(ICONST_0),
            op(AALOAD),
            op(CHECKCAST, pool.cls(SERVER_CONNECTOR)),
            op(LDC_W, pool.string(host)),
            op(INVOKEVIRTUAL, pool.method(SERVER_CONNECTOR, "setHost", "(Ljava/lang/String;)V")),
            op(ALOAD_1),
            op(INVOKEVIRTUAL, pool.method(PROXY_SERVER, "start", "()V")),
            op(RETURN),
        ]
    )


def write_launcher(directory: Path) -> Path:
    """Write the class into `directory` (a classpath entry) unless it is already there."""
    path = directory / f"{MAIN_CLASS}.class"
    data = class_bytes()
    if path.is_file() and path.read_bytes() == data:
        return directory
    directory.mkdir(parents=True, exist_ok=True)
    # Whole or not at all: two stacks starting at once may both write it.
    part = directory / f".{MAIN_CLASS}.{os.getpid()}.part"
    part.write_bytes(data)
    part.replace(path)
    return directory
