"""The S3 adapter of the BlobStore port: the private, encrypted attachments bucket."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit

from botocore.exceptions import ClientError

from tenure.app.ports import Blob
from tenure.store.calls import Retry, translate

DELETE_BATCH = 1000  # DeleteObjects takes at most this many keys
_MISSING = {"404", "NoSuchKey", "NotFound"}


class S3Blobs:
    def __init__(self, client: Any, bucket: str, retry: Retry | None = None) -> None:
        self.client = client
        self.bucket = bucket
        self.retry = retry or Retry()

    def _call(self, what: str, fn: Any, read: bool = False, **request: Any) -> dict[str, Any]:
        try:
            return self.retry.call(what, fn, {"Bucket": self.bucket, **request}, read=read)
        except ClientError as err:
            raise translate(err, None) from err

    def presign_put(
        self, key: str, content_type: str, byte_size: int, expires_s: int
    ) -> tuple[str, dict[str, str]]:
        # Content type and length are signed: a PUT of other bytes is refused by S3 itself.
        url = self.client.generate_presigned_url(
            "put_object",
            Params={
                "Bucket": self.bucket,
                "Key": key,
                "ContentType": content_type,
                "ContentLength": byte_size,
            },
            ExpiresIn=expires_s,
            HttpMethod="PUT",
        )
        return str(url), {"Content-Type": content_type, "Content-Length": str(byte_size)}

    def put(self, key: str, data: bytes, content_type: str) -> None:
        put = self.client.put_object
        self._call("put_object", put, Key=key, Body=data, ContentType=content_type)

    def head(self, key: str) -> Blob | None:
        try:
            out = self.retry.call(
                "head_object", self.client.head_object, {"Bucket": self.bucket, "Key": key}, True
            )
        except ClientError as err:
            if str(err.response.get("Error", {}).get("Code")) in _MISSING:
                return None
            raise translate(err, None) from err
        written = int(out["LastModified"].timestamp() * 1000)
        return Blob(int(out["ContentLength"]), str(out.get("ContentType") or ""), written)

    def get(self, key: str) -> bytes | None:
        try:
            request = {"Bucket": self.bucket, "Key": key}
            out = self.retry.call("get_object", self.client.get_object, request, True)
        except ClientError as err:
            if str(err.response.get("Error", {}).get("Code")) in _MISSING:
                return None
            raise translate(err, None) from err
        return bytes(out["Body"].read())

    def presign_get(self, key: str, filename: str, content_type: str, expires_s: int) -> str:
        disposition = f"attachment; filename*=UTF-8''{quote(filename, safe='')}"
        return str(
            self.client.generate_presigned_url(
                "get_object",
                Params={
                    "Bucket": self.bucket,
                    "Key": key,
                    "ResponseContentType": content_type,
                    "ResponseContentDisposition": disposition,
                },
                ExpiresIn=expires_s,
            )
        )

    def origin(self) -> str:
        """Where presigned downloads point (scheme://host[:port]): the board's page lets its
        script follow a redirect there and nowhere else."""
        # Presigned (never fetched) under leases/, where the function's downloads come from:
        # a URL the role could not use would be signed for nothing it may do.
        url = urlsplit(self.presign_get("leases/origin", "origin", "text/plain", 60))
        return f"{url.scheme}://{url.netloc}"

    def copy(self, source: str, target: str) -> None:
        self._call(
            "copy_object",
            self.client.copy_object,
            Key=target,
            CopySource={"Bucket": self.bucket, "Key": source},
            MetadataDirective="COPY",
        )

    def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), DELETE_BATCH):
            chunk = keys[start : start + DELETE_BATCH]
            out = self._call(
                "delete_objects",
                self.client.delete_objects,
                Delete={"Objects": [{"Key": key} for key in chunk], "Quiet": True},
            )
            if out.get("Errors"):
                failed = ", ".join(f"{e.get('Key')}: {e.get('Code')}" for e in out["Errors"][:5])
                raise RuntimeError(f"S3 kept {len(out['Errors'])} objects: {failed}")
