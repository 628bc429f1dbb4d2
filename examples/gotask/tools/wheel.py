"""Build dist/greet-VERSION-py3-none-any.whl from src/greet with the standard library alone.

    python tools/wheel.py VERSION
"""

import base64
import hashlib
import sys
import zipfile
from pathlib import Path

NAME = "greet"


def main(version: str) -> Path:
    dist_info = f"{NAME}-{version}.dist-info"
    files = {f"{NAME}/{p.name}": p.read_bytes() for p in sorted(Path("src", NAME).glob("*.py"))}
    metadata = f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {version}\n"
    files[f"{dist_info}/METADATA"] = metadata.encode()
    files[f"{dist_info}/WHEEL"] = b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    files[f"{dist_info}/RECORD"] = ("\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n").encode()
    wheel = Path("dist", f"{NAME}-{version}-py3-none-any.whl")
    wheel.parent.mkdir(exist_ok=True)
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return wheel


if __name__ == "__main__":
    print(main(sys.argv[1]))
