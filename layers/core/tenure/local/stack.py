"""`tenure local`: the whole service on 127.0.0.1, on DynamoDB Local and moto."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenure import wiring
from tenure.config import export, local_settings
from tenure.local.engines import DynamoDBLocal, EngineFailed, EngineUnavailable, MotoServer
from tenure.local.frontdoor import FrontDoor
from tenure.local.provision import Provisioned, Provisioner
from tenure.local.streams import StreamPump

TABLE = "tenure"
STREAM_POLL_SECONDS = 0.2


@dataclass
class Stack:
    port: int
    data_dir: Path
    sweep_interval: float
    engines: list[Any] = field(default_factory=list)
    provisioned: list[Provisioned] = field(default_factory=list)
    door: FrontDoor | None = None
    stopping: threading.Event = field(default_factory=threading.Event)

    def start(self) -> dict[str, Any]:
        cfg = local_settings()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # Bind the API's port first: the engines pick free ports, and one could otherwise take
        # the very port a restart asks for in the moment it is free.
        self.door = FrontDoor("127.0.0.1", self.port)
        moto = MotoServer().start()
        self.engines.append(moto)
        engine = "dynamodb-local"
        try:
            ddb = DynamoDBLocal(Path(cfg.cache_dir), self.data_dir / "dynamodb").start()
            self.engines.append(ddb)
            endpoint = ddb.endpoint
        except EngineUnavailable as why:
            if cfg.require_engines:
                raise
            print(f"WARNING: {why}", file=sys.stderr)
            print(
                "WARNING: falling back to moto for DynamoDB: data is lost on restart and "
                "conditional writes are not atomic across threads",
                file=sys.stderr,
            )
            endpoint, engine = moto.endpoint, "moto"
        export("TENURE_TABLE", TABLE)
        export("TENURE_SWEEP_INTERVAL_SECONDS", str(self.sweep_interval))
        export("TENURE_DYNAMODB_ENDPOINT", endpoint)
        self.provisioned = Provisioner(endpoint, moto.endpoint, TABLE, "tenure-local").run()
        store = wiring.build_store()
        admin_token, token_file = self._admin_token()
        wiring.build_service(store).bootstrap_admin(admin_token)
        self.door.start()
        threading.Thread(target=self._sweep_loop, daemon=True).start()
        threading.Thread(target=self._stream_loop, args=(endpoint,), daemon=True).start()
        info = {
            "api": f"http://127.0.0.1:{self.door.port}/api/v1",
            "dynamodb": {"engine": engine, "endpoint": endpoint},
            "aws": {"endpoint": moto.endpoint, "services": "s3 sqs logs scheduler ses"},
            "data_dir": str(self.data_dir),
            "admin_token_file": str(token_file) if token_file else None,
            "sweep_interval_seconds": self.sweep_interval,
            "pid": os.getpid(),
        }
        (self.data_dir / "stack.json").write_text(json.dumps(info, indent=2))
        return info

    def _admin_token(self) -> tuple[str, Path | None]:
        given = local_settings().admin_token
        if given:
            return given, None
        path = self.data_dir / "admin-token"
        if path.exists():
            return path.read_text().strip(), path
        raw = "tnr_o_" + wiring.RandomIds().secret()
        path.write_text(raw + "\n")
        path.chmod(0o600)
        print(f"new admin token (kept in {path}): {raw}")
        return raw, path

    def _sweep_loop(self) -> None:
        """Stands in for the sweeper's rate(1 minute) schedule."""
        from tenure.sweeper import run_pass

        while not self.stopping.wait(self.sweep_interval):
            try:
                run_pass()
            except Exception as err:
                print(f"[sweeper] pass failed: {err!r}", file=sys.stderr, flush=True)

    def _stream_loop(self, endpoint: str) -> None:
        """Stands in for the reactor's DynamoDB stream trigger."""
        pump = StreamPump(endpoint, TABLE, wiring.build_store())
        while not self.stopping.wait(STREAM_POLL_SECONDS):
            try:
                pump.pump_once()
            except Exception as err:
                print(f"[reactor] stream read failed: {err!r}", file=sys.stderr, flush=True)

    def stop(self) -> None:
        self.stopping.set()
        if self.door is not None:
            self.door.stop()
        for engine in reversed(self.engines):
            engine.stop()


def run(port: int, data_dir: Path, sweep_interval: float, reset: bool) -> int:
    if reset and data_dir.exists():
        shutil.rmtree(data_dir)
        print(f"reset: removed {data_dir}")
    stack = Stack(port=port, data_dir=data_dir, sweep_interval=sweep_interval)
    done = threading.Event()

    def _stop(signum: int, _frame: Any) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        try:
            info = stack.start()
        except EngineFailed as failed:
            print(f"error: {failed}", file=sys.stderr)
            return 1
        print("tenure local is up")
        print(f"  API            {info['api']}  (try {info['api']}/health)")
        print(f"  DynamoDB       {info['dynamodb']['engine']} at {info['dynamodb']['endpoint']}")
        print(f"  AWS (moto)     {info['aws']['endpoint']}  ({info['aws']['services']})")
        print(f"  data           {info['data_dir']}")
        if info["admin_token_file"]:
            print(f"  admin token    in {info['admin_token_file']}")
        else:
            print("  admin token    the value of TENURE_ADMIN_TOKEN")
        print(f"  sweeper        every {sweep_interval:g}s")
        print("  from infra/template.yaml:")
        for made in stack.provisioned:
            print(f"    {made.logical_id:28s} {made.kind:30s} {made.local_name}")
        print("Ctrl-C stops everything.", flush=True)
        done.wait()
    finally:
        print("stopping…", flush=True)
        stack.stop()
    return 0
