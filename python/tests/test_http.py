"""Shards behind URLs: a server on the loopback address (Python's, with byte ranges, failures on
command and S3's Signature Version 4 checked as S3 checks it) serves the shards that the tests
also read as files, and the loader must give the same batches, retry what fails, refuse what a
server refuses with the URL named, and sign what it sends to S3 correctly."""

import hashlib
import hmac
import http.server
import re
import shutil
import ssl
import subprocess
import threading
import urllib.parse

import numpy as np
import pytest

import crema
from test_shards import epoch, same, write_dali_indexes, write_tfrecords, write_webdataset

pytestmark = pytest.mark.skipif(not crema.build_info()["http"],
                                reason="crema was built without crema::http (libcurl)")

KEY, SECRET, TOKEN, REGION = "AKIDCREMATEST", "crema/secret/key", "session-token", "eu-west-3"


def _hmac(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signature_fault(method, path, query, headers, key=KEY, secret=SECRET, region=REGION):
    """Why the request is not signed as S3 wants it (AWS Signature Version 4, a header
    signature), or None: the canonical request rebuilt from what arrived, signed with the key."""
    authorization = headers.get("Authorization", "")
    match = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/s3/aws4_request, "
                         r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})", authorization)
    if not match:
        return f"no AWS4-HMAC-SHA256 authorization: {authorization!r}"
    signed_key, day, signed_region, signed, signature = match.groups()
    if signed_key != key or signed_region != region:
        return f"credential {signed_key}/{signed_region}"
    names = signed.split(";")
    for needed in ("host", "x-amz-date", "x-amz-content-sha256"):
        if needed not in names:
            return f"{needed} is not signed"
    if "X-Amz-Security-Token" in headers and "x-amz-security-token" not in names:
        return "the session token is not signed"
    amz_date = headers["x-amz-date"]
    canonical_query = "&".join(sorted(query.split("&"))) if query else ""
    canonical_headers = "".join(f"{name}:{' '.join(headers[name].split())}\n" for name in names)
    canonical = "\n".join([method, urllib.parse.quote(path, safe="/~"), canonical_query,
                           canonical_headers, signed, headers["x-amz-content-sha256"]])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    signing = _hmac(_hmac(_hmac(_hmac(("AWS4" + secret).encode(), day), region), "s3"),
                    "aws4_request")
    if not hmac.compare_digest(hmac.new(signing, to_sign.encode(), hashlib.sha256).hexdigest(),
                               signature):
        return "the signature does not match"
    return None


class ShardServer(http.server.ThreadingHTTPServer):
    """Serves the files under ``root`` with byte ranges; ``fail`` holds statuses for the next
    requests; with ``signed``, every request must carry S3's signature (else 403); with
    ``certificate`` (cert and key files), over TLS."""

    daemon_threads = True

    def __init__(self, root, signed=False, certificate=None):
        super().__init__(("127.0.0.1", 0), RangeHandler)
        self.scheme = "http"
        if certificate:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*certificate)
            self.socket = context.wrap_socket(self.socket, server_side=True)
            self.scheme = "https"
        self.root = root
        self.signed = signed
        self.fail = []
        self.requests = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        return f"{self.scheme}://127.0.0.1:{self.server_address[1]}/{path}"

    def close(self):
        self.shutdown()
        self.server_close()
        self.thread.join()


class RangeHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _refuse(self, status, text):
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _answer(self):
        server = self.server
        path, _, query = self.path.partition("?")
        with server.lock:
            server.requests.append((self.command, path,
                                    {name.lower(): value for name, value in self.headers.items()}))
            status = server.fail.pop(0) if server.fail else None
        if status:
            return self._refuse(status, "injected")
        if server.signed:
            fault = signature_fault(self.command, path, query, self.headers)
            if fault:
                return self._refuse(403, f"SignatureDoesNotMatch: {fault}")
        file = server.root / urllib.parse.unquote(path.lstrip("/"))
        if ".." in path or not file.is_file():
            return self._refuse(404, "NoSuchKey")
        data = file.read_bytes()
        if self.command == "HEAD":
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            return None
        first, last = 0, len(data) - 1
        ranged = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        if ranged:
            first = int(ranged.group(1))
            last = min(last, int(ranged.group(2))) if ranged.group(2) else last
        self.send_response(206 if ranged else 200)
        if ranged:
            self.send_header("Content-Range", f"bytes {first}-{last}/{len(data)}")
        self.send_header("Content-Length", str(last - first + 1))
        self.end_headers()
        self.wfile.write(data[first:last + 1])
        return None

    do_GET = _answer
    do_HEAD = _answer


@pytest.fixture
def serve():
    servers = []

    def start(root, signed=False, certificate=None):
        servers.append(ShardServer(root, signed, certificate))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def test_webdataset_shards_over_http_give_the_files_batches(photos, tmp_path, serve):
    paths = write_webdataset(photos, tmp_path)
    server = serve(tmp_path)
    urls = [server.url(path.name) for path in paths]
    from_files = epoch(crema.WebDataset([str(path) for path in paths]))
    assert same(epoch(crema.WebDataset(server.url("shard-{000000..000002}.tar"))), from_files)
    assert same(epoch(crema.WebDataset(urls)), from_files)

    write_dali_indexes(paths)
    requests = len(server.requests)
    assert same(epoch(crema.WebDataset(urls, index="auto")), from_files)
    opened = server.requests[requests:requests + 2 * len(urls) + len(urls)]
    assert sum(1 for method, path, _ in opened if path.endswith(".idx")) == 2 * len(urls)


def test_tfrecord_files_over_http_give_the_files_batches(photos, tmp_path, serve):
    write_tfrecords(photos, tmp_path)
    server = serve(tmp_path)
    source = crema.TFRecord(server.url("shard-{000000..000002}.tfrecord"), image="jpeg",
                            label="class")
    local = crema.TFRecord(str(tmp_path / "shard-*.tfrecord"), image="jpeg", label="class")
    assert same(epoch(source, shuffle=False), epoch(local, shuffle=False))


def test_shard_by_shard_over_a_cache_gives_the_files_batches_in_fewer_requests(photos, tmp_path,
                                                                               serve):
    paths = write_webdataset(photos, tmp_path)
    server = serve(tmp_path)
    urls = [server.url(path.name) for path in paths]
    local = epoch(crema.WebDataset([str(path) for path in paths], shard_blocks=1))
    plain = epoch(crema.WebDataset([str(path) for path in paths]))
    assert not same(local, plain)  # another order
    assert sorted(np.concatenate([labels for _, labels in local]).tolist()) == \
        sorted(np.concatenate([labels for _, labels in plain]).tolist())
    cached = crema.HTTP(cache_bytes=4 << 20, chunk_bytes=64 << 10)
    requests = len(server.requests)
    assert same(epoch(crema.WebDataset(urls, shard_blocks=1, http=cached)), local)
    chunks = sum((path.stat().st_size + (64 << 10) - 1) // (64 << 10) for path in paths)
    sizes = len(urls)  # each shard's size asked once; its headers and samples read by chunk
    assert len(server.requests) - requests == sizes + chunks
    with pytest.raises(ValueError, match="shard_blocks must be an int >= 1 or None"):
        crema.WebDataset(urls, shard_blocks=0)
    with pytest.raises(ValueError, match="cache_bytes must be an int >= 0"):
        crema.HTTP(cache_bytes=-1)


def test_streamed_shards_over_http_give_the_files_batches(photos, tmp_path, serve):
    paths = write_webdataset(photos, tmp_path)
    server = serve(tmp_path)
    samples = sum(1 for _ in photos.rglob("*.jpg"))
    cached = crema.HTTP(cache_bytes=128 << 10, chunk_bytes=64 << 10)
    remote = crema.WebDataset(server.url("shard-{000000..000002}.tar"), stream=True,
                              shuffle_buffer=4, epoch_samples=samples, http=cached)
    local = crema.WebDataset([str(path) for path in paths], stream=True, shuffle_buffer=4,
                             epoch_samples=samples)
    assert same(epoch(remote), epoch(local))


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl to make a certificate")
def test_https_with_the_servers_authority_and_refused_without_it(photos, tmp_path, serve):
    shards = tmp_path / "shards"
    shards.mkdir()
    paths = write_webdataset(photos, shards)
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    server = serve(shards, certificate=(str(cert), str(key)))
    urls = [server.url(path.name) for path in paths]
    assert urls[0].startswith("https://127.0.0.1:")
    trusted = crema.HTTP(ca_file=cert)
    assert same(epoch(crema.WebDataset(urls, http=trusted)),
                epoch(crema.WebDataset([str(path) for path in paths])))
    # The system's authorities do not know this server: refused at once (no "after N
    # attempts"), naming the URL.
    with pytest.raises(crema.IOError, match=re.escape(f"shard {urls[0]}: cannot ask its size: "
                                                      "libcurl: ") + "[^()]*certificate[^()]*$"):
        epoch(crema.WebDataset(urls, http=crema.HTTP(retries=3, backoff=5.0)))


def test_failures_are_retried_and_refusals_name_the_url(photos, tmp_path, serve):
    paths = write_webdataset(photos, tmp_path)
    server = serve(tmp_path)
    urls = [server.url(path.name) for path in paths]
    from_files = epoch(crema.WebDataset([str(path) for path in paths]))
    quick = crema.HTTP(retries=3, backoff=0.01)
    server.fail = [503, 500, 429]
    assert same(epoch(crema.WebDataset(urls, http=quick)), from_files)
    assert server.fail == []

    missing = server.url("shard-000009.tar")
    with pytest.raises(crema.IOError,
                       match=re.escape(f"shard {missing}: cannot ask its size: HTTP 404: "
                                       "NoSuchKey")):
        epoch(crema.WebDataset([missing], http=quick))
    server.fail = [500] * 4
    with pytest.raises(crema.IOError, match=r"HTTP 500: injected \(after 4 attempts\)"):
        epoch(crema.WebDataset(urls, http=quick))


def test_s3_urls_are_signed_as_s3_checks_signatures(photos, tmp_path, serve, monkeypatch):
    bucket = tmp_path / "bucket" / "train"
    bucket.mkdir(parents=True)
    paths = write_webdataset(photos, bucket)
    server = serve(tmp_path, signed=True)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL", server.url(""))
    source = crema.WebDataset("s3://bucket/train/shard-{000000..000002}.tar")
    assert same(epoch(source), epoch(crema.WebDataset([str(path) for path in paths])))
    assert all(headers.get("x-amz-security-token") == TOKEN
               for _, _, headers in server.requests)

    # A wrong secret: S3 refuses the signature, and the error says so, naming the URL.
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(crema.IOError, match=r"shard s3://bucket/train/shard-000000.tar: cannot "
                                            r"ask its size \(at http://127.0.0.1:\d+/bucket/train/"
                                            r"shard-000000.tar\): HTTP 403: SignatureDoesNotMatch"):
        epoch(crema.WebDataset("s3://bucket/train/shard-{000000..000002}.tar"))


class _Headers(dict):
    """Header names compared without case, as http.server's are."""

    def __init__(self, items):
        super().__init__({name.lower(): value for name, value in items.items()})

    def get(self, name, default=None):
        return super().get(name.lower(), default)

    def __getitem__(self, name):
        return super().__getitem__(name.lower())

    def __contains__(self, name):
        return super().__contains__(name.lower())


def test_the_signature_check_itself_passes_aws_example_and_refuses_others():
    # S3's documented example of a signed GET (the API reference's "GET Object" with a range):
    # the server's check must pass it and fail it once anything signed changes, or the test
    # above proves nothing.
    example = {
        "Host": "examplebucket.s3.amazonaws.com", "Range": "bytes=0-9",
        "x-amz-content-sha256":
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "x-amz-date": "20130524T000000Z",
        "Authorization": "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/"
                         "s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;"
                         "x-amz-date, Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48"
                         "dd91039c6036bdb41"}
    check = {"key": "AKIAIOSFODNN7EXAMPLE", "region": "us-east-1",
             "secret": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}
    assert signature_fault("GET", "/test.txt", "", _Headers(example), **check) is None
    assert signature_fault("GET", "/test.txt", "", _Headers(example),
                           **{**check, "secret": "other"}) == "the signature does not match"
    assert signature_fault("GET", "/other.txt", "", _Headers(example), **check) == \
        "the signature does not match"
    assert signature_fault("GET", "/test.txt", "", _Headers({**example, "Range": "bytes=0-10"}),
                           **check) == "the signature does not match"
    assert signature_fault("GET", "/test.txt", "", _Headers(example),
                           **{**check, "region": "eu-west-3"}).startswith("credential")


def test_bad_http_arguments_are_named():
    with pytest.raises(ValueError, match="retries must be an int >= 0"):
        crema.HTTP(retries=-1)
    with pytest.raises(ValueError, match="request_timeout must be seconds > 0 or None"):
        crema.HTTP(request_timeout=0)
    with pytest.raises(ValueError, match="stall_timeout must be whole seconds >= 1"):
        crema.HTTP(stall_timeout=0.5)
    with pytest.raises(TypeError, match="headers must be a sequence"):
        crema.HTTP(headers="X-A: b")
    with pytest.raises(TypeError, match="http must be a crema.HTTP"):
        crema.WebDataset("http://127.0.0.1:9/a.tar", http={"retries": 1})
