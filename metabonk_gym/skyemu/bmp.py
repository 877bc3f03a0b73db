"""BMP screens: decode what SkyEmu's `/screen?format=bmp` sends, and encode the same bytes.

SkyEmu writes screens with stb_image_write (`stbi_write_bmp`, 4 channels): a 32-bit bottom-up
bitmap with a BITMAPV4 header and BI_BITFIELDS masks, pixels as B, G, R, A bytes. Older stb builds
write 24-bit BI_RGB rows padded to 4 bytes; the decoder takes both, top-down too. BMP is the
cheapest of SkyEmu's formats to make and to read (no compression), so the backend asks for it.

>>> import numpy as np
>>> rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
>>> data = encode_bmp(rgb)
>>> data[:2], len(data)
(b'BM', 146)
>>> bool((decode_bmp(data) == rgb).all())
True
"""

from __future__ import annotations

import struct

import numpy as np

from metabonk_gym.skyemu.errors import SkyEmuProtocolError

_FILE_HEADER = struct.Struct("<2sIHHI")
_V4_HEADER_SIZE = 108
#: stb's masks for 32-bit bitmaps: R, G, B, A.
_STB_MASKS = (0x00FF0000, 0x0000FF00, 0x000000FF, 0xFF000000)


def encode_bmp(rgb: np.ndarray) -> bytes:
    """The bytes `stbi_write_bmp(..., comp=4, ...)` writes for an RGB image (alpha 255)."""
    height, width = rgb.shape[:2]
    size = width * height * 4
    header = _FILE_HEADER.pack(b"BM", 14 + _V4_HEADER_SIZE + size, 0, 0, 14 + _V4_HEADER_SIZE)
    info = struct.pack(
        "<IiiHHIIiiII4IIiiiiiiiiiIII",
        _V4_HEADER_SIZE, width, height, 1, 32, 3, 0, 0, 0, 0, 0, *_STB_MASKS, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    )  # fmt: skip
    pixels = np.empty((height, width, 4), dtype=np.uint8)
    pixels[..., 0] = rgb[..., 2]
    pixels[..., 1] = rgb[..., 1]
    pixels[..., 2] = rgb[..., 0]
    pixels[..., 3] = 255
    return header + info + pixels[::-1].tobytes()


def decode_bmp(data: bytes) -> np.ndarray:
    """An uncompressed 24- or 32-bit BMP as a uint8 (height, width, 3) RGB array."""
    if len(data) < 54 or data[:2] != b"BM":
        raise SkyEmuProtocolError(
            f"/screen?format=bmp did not return a BMP image (starts {data[:16]!r})"
        )
    offset = struct.unpack_from("<I", data, 10)[0]
    dib_size, width, height, _planes, bpp, compression = struct.unpack_from("<IiiHHI", data, 14)
    if bpp not in (24, 32) or compression not in (0, 3) or width <= 0 or height == 0:
        raise SkyEmuProtocolError(
            f"unsupported BMP from SkyEmu: {width}x{height}, {bpp} bits per pixel, compression {compression}"
        )
    if compression == 3:
        masks_at = 14 + 40 if dib_size >= 52 else 14 + dib_size
        masks = struct.unpack_from("<III", data, masks_at)
        if masks != _STB_MASKS[:3]:
            raise SkyEmuProtocolError(f"unsupported BMP colour masks {[hex(m) for m in masks]}")
    rows = abs(height)
    stride = (width * (bpp // 8) + 3) & ~3
    if offset + stride * rows > len(data):
        raise SkyEmuProtocolError(
            f"BMP from SkyEmu is truncated ({len(data)} bytes for {width}x{rows})"
        )
    raw = np.frombuffer(data, dtype=np.uint8, count=stride * rows, offset=offset).reshape(
        rows, stride
    )
    pixels = raw[:, : width * (bpp // 8)].reshape(rows, width, bpp // 8)
    if height > 0:  # bottom-up, as stb writes it
        pixels = pixels[::-1]
    out = np.empty((rows, width, 3), dtype=np.uint8)
    for channel in range(3):  # B, G, R -> R, G, B; per-channel copies are the fastest in numpy
        out[..., channel] = pixels[..., 2 - channel]
    return out
