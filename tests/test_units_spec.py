import pytest

from xferscope.errors import SpecError
from xferscope.spec import RunSpec, parse_int_list
from xferscope.units import format_size, parse_duration, parse_size


@pytest.mark.parametrize(
    "text,value",
    [
        ("4K", 4096),
        ("64k", 65536),
        ("1M", 1 << 20),
        ("1G", 1 << 30),
        ("512", 512),
        ("1.5K", 1536),
        ("2GiB", 2 << 30),
        (4096, 4096),
    ],
)
def test_parse_size(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1.3K", "-4K", "4X"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError):
        parse_size(text)


def test_format_and_durations():
    assert format_size(4096) == "4K" and format_size(1 << 30) == "1G" and format_size(1000) == "1000"
    assert parse_duration("500ms") == 0.5 and parse_duration("2m") == 120 and parse_duration(3) == 3.0


def test_int_lists():
    assert parse_int_list("0,1,4-6", "gpu") == [0, 1, 4, 5, 6]
    with pytest.raises(SpecError, match="gpu"):
        parse_int_list("a", "gpu")


@pytest.mark.parametrize(
    "changes,field",
    [
        ({"path": "nvme"}, "path"),
        ({"io": "readwrite"}, "io"),
        ({"block_size": 1000}, "block_size"),
        ({"workers": 0}, "workers"),
        ({"iodepth": 0}, "iodepth"),
        ({"file_size": 1024}, "file_size"),
        ({"duration": None, "total_bytes": None}, "duration"),
        ({"rwmix": 101}, "rwmix"),
        ({"file": "a", "directory": "b"}, "file"),
    ],
)
def test_validation_names_the_field(changes, field):
    with pytest.raises(SpecError) as exc:
        RunSpec(**changes).validate()
    assert exc.value.field == field
    assert str(exc.value).startswith(field)


def test_derived_properties():
    s = RunSpec(io="randrw", rwmix=70)
    assert s.read_pct == 70 and s.writes and s.is_random
    assert RunSpec(io="read").read_pct == 100 and not RunSpec(io="read").writes
    assert RunSpec(path="bounce").uses_gpu and not RunSpec().uses_gpu
    assert RunSpec(**RunSpec(workers=3).to_dict()).workers == 3
