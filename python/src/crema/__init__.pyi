# Type hints for crema's public API (the package's modules carry none; this is the one place).
import os
from typing import Any, Iterator, Literal, Sequence

__version__: str

_Path = str | bytes | os.PathLike[str]
_Size = int | tuple[int, int]

class Error(RuntimeError): ...
class ConfigError(Error, ValueError): ...
class FormatError(Error, ValueError): ...
class PipelineError(Error): ...
class IOError(Error, OSError): ...
class LMDBError(Error): ...

def build_info() -> dict[str, Any]: ...

class ImageFolder:
    root: str
    extensions: tuple[str, ...]
    def __init__(self, root: _Path,
                 extensions: Sequence[str] = (".jpg", ".jpeg", ".png")) -> None: ...

class ImageList:
    list_file: str
    root: str
    def __init__(self, list_file: _Path, root: _Path) -> None: ...

class CaffeLMDB:
    path: str
    def __init__(self, path: _Path) -> None: ...

class HTTP:
    retries: int
    backoff: float
    most_backoff: float
    connect_timeout: float
    request_timeout: float | None
    stall_timeout: int
    aws_sigv4: str
    s3_endpoint: str
    region: str
    headers: list[str]
    cache_bytes: int
    chunk_bytes: int
    ca_file: str
    def __init__(self, retries: int = 5, backoff: float = 0.2, most_backoff: float = 10.0,
                 connect_timeout: float = 10.0, request_timeout: float | None = None,
                 stall_timeout: int = 30, aws_sigv4: str | None = None,
                 s3_endpoint: str | None = None, region: str | None = None,
                 headers: Sequence[str] = (), cache_bytes: int = 0,
                 chunk_bytes: int = 8388608, ca_file: _Path | None = None) -> None: ...

class WebDataset:
    shards: list[str]
    index: list[str]
    http: HTTP
    shard_blocks: int
    stream: bool
    shuffle_buffer: int
    epoch_samples: int
    def __init__(self, shards: _Path | Sequence[_Path],
                 index: Literal["auto"] | _Path | Sequence[_Path] | None = None,
                 http: HTTP | None = None, shard_blocks: int | None = None,
                 stream: bool = False, shuffle_buffer: int = 1000,
                 epoch_samples: int | None = None) -> None: ...

class TFRecord:
    shards: list[str]
    index: list[str]
    image: str
    label: str
    http: HTTP
    shard_blocks: int
    stream: bool
    shuffle_buffer: int
    epoch_samples: int
    def __init__(self, shards: _Path | Sequence[_Path], image: str = "image/encoded",
                 label: str = "image/class/label",
                 index: Literal["auto"] | _Path | Sequence[_Path] | None = None,
                 http: HTTP | None = None, shard_blocks: int | None = None,
                 stream: bool = False, shuffle_buffer: int = 1000,
                 epoch_samples: int | None = None) -> None: ...

class RandomResizedCrop:
    size: tuple[int, int]
    scale: tuple[float, float]
    ratio: tuple[float, float]
    def __init__(self, size: _Size, scale: tuple[float, float] = (0.08, 1.0),
                 ratio: tuple[float, float] = (3.0 / 4.0, 4.0 / 3.0)) -> None: ...

class ResizeCenterCrop:
    resize: int
    crop: tuple[int, int]
    def __init__(self, resize: int = 256, crop: _Size = 224) -> None: ...

class ImageTransform:
    def __init__(self, crop: RandomResizedCrop | ResizeCenterCrop | None = None,
                 flip: bool = False, jitter: tuple[float, float, float] | None = None,
                 mean: tuple[float, float, float] = (0.0, 0.0, 0.0),
                 std: tuple[float, float, float] = (1.0, 1.0, 1.0),
                 dtype: Literal["float32", "uint8"] = "float32",
                 layout: Literal["NCHW", "NHWC"] = "NCHW",
                 detail: Literal["exact", "reduced"] = "exact",
                 decoder: Literal["cpu", "nvjpeg"] = "cpu") -> None: ...

class CaffeTransform:
    def __init__(self, crop: int = 0, mirror: bool = False, mean_file: _Path | None = None,
                 mean_values: Sequence[float] | None = None, scale: float = 1.0,
                 train: bool = True, dtype: Literal["float32", "uint8"] = "float32") -> None: ...

class Loader:
    def __init__(self, source: ImageFolder | ImageList | CaffeLMDB | WebDataset | TFRecord,
                 transform: ImageTransform | CaffeTransform, batch_size: int, *,
                 threads: int | None = None, seed: int = 0, shuffle: bool = True,
                 last_batch: Literal["keep", "drop", "pad"] = "keep",
                 shard: Literal["auto"] | tuple[int, int] = "auto", prefetch: int = 0,
                 output: Literal["torch", "numpy", "dlpack"] = "torch", copy: bool = False,
                 device: str | Any | None = None, stall_timeout: float = 60.0,
                 hang_timeout: float = 60.0) -> None: ...
    def __len__(self) -> int: ...
    @property
    def classes(self) -> list[str] | None: ...
    @property
    def class_to_idx(self) -> dict[str, int] | None: ...
    def __iter__(self) -> Iterator[tuple[Any, Any]]: ...
    def set_epoch(self, epoch: int) -> None: ...
    @property
    def epoch(self) -> int: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: dict[str, Any]) -> None: ...
    def close(self) -> None: ...
    def __enter__(self) -> Loader: ...
    def __exit__(self, *exc: object) -> None: ...
    def stats(self) -> str: ...
