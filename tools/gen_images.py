#!/usr/bin/python3
"""Write tests/images/: small PNG, JPEG and GIF files for k3's decoders (src/image/), each
with Pillow's decode converted to RGBA in ref/NAME.rgba, and manifest.txt, which
tests/sh/image_decode.sh reads:
    ok NAME                 k3 image --rgba must equal ref/NAME.rgba byte for byte
    bad NAME CODE TEXT      k3 image must exit CODE with TEXT in its message

Deterministic (fixed seeds, zlib and libjpeg are): rerunning rewrites the same bytes with the
same Pillow (9.4, libjpeg-turbo 2.1 here). PNGs are written by the small encoder below (every
colour type, depth, filter, interlace and block type; Pillow writes few of them); JPEGs by
Pillow, and by libjpeg-turbo's cjpeg for restart markers, 4:4:0 and an RGB (Adobe transform 0)
file; GIFs by Pillow and, for a frame smaller than the screen, by the encoder below.

    /usr/bin/python3 tools/gen_images.py [OUT_DIR]      (default tests/images)
"""
import io, os, struct, subprocess, sys, tempfile, zlib
import numpy as np
from PIL import Image

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/images"
MANIFEST = []


def pattern(w, h, seed):
    """RGB uint8 h x w x 3: gradients, a few hard-edged blocks, mild noise."""
    r = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.stack([255 * x / max(w - 1, 1), 255 * y / max(h - 1, 1),
                    128 + 100 * np.sin((x + 2 * y) / 3.0)], axis=-1)
    for _ in range(3):
        x0, y0 = r.integers(0, w), r.integers(0, h)
        img[y0:y0 + h // 3 + 1, x0:x0 + w // 3 + 1] = r.integers(0, 256, 3)
    img += r.normal(0, 12, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))


def filt(rows, bpp):
    """Each row filtered with type (row index % 5): all five filters appear."""
    out, prev = [], bytes(len(rows[0])) if rows else b""
    for i, r in enumerate(rows):
        f, o = i % 5, bytearray()
        for k in range(len(r)):
            a = r[k - bpp] if k >= bpp else 0
            b = prev[k]
            c = prev[k - bpp] if k >= bpp else 0
            if f == 0: p = 0
            elif f == 1: p = a
            elif f == 2: p = b
            elif f == 3: p = (a + b) // 2
            else:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                p = a if pa <= pb and pa <= pc else b if pb <= pc else c
            o.append((r[k] - p) & 255)
        out.append(bytes([f]) + bytes(o))
        prev = r
    return b"".join(out)


def pack_rows(s, depth):
    """s: h x w x c samples -> list of packed row bytes"""
    h, w, c = s.shape
    rows = []
    for y in range(h):
        v = s[y].reshape(-1)
        if depth == 16:
            rows.append(v.astype(">u2").tobytes())
        elif depth == 8:
            rows.append(v.astype(np.uint8).tobytes())
        else:
            bits = "".join(format(int(q), "0%db" % depth) for q in v)
            bits += "0" * (-len(bits) % 8)
            rows.append(bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8)))
    return rows


def png(name, s, ctype, depth, plte=None, trns=None, interlace=False, level=9,
        strategy=zlib.Z_DEFAULT_STRATEGY):
    h, w, c = s.shape
    bpp = max(1, c * depth // 8)
    if interlace:
        raw = b""
        for x0, y0, dx, dy in ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4),
                               (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)):
            sub = s[y0::dy, x0::dx]
            if sub.shape[0] and sub.shape[1]:
                raw += filt(pack_rows(sub, depth), bpp)
    else:
        raw = filt(pack_rows(s, depth), bpp)
    co = zlib.compressobj(level, zlib.DEFLATED, 15, 9, strategy)
    z = co.compress(raw) + co.flush()
    d = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype,
                                                           0, 0, int(interlace)))
    if plte is not None:
        d += chunk(b"PLTE", np.asarray(plte).astype(np.uint8).tobytes())
    if trns is not None:
        d += chunk(b"tRNS", trns)
    half = len(z) // 2          # two IDATs: the decoder must join them
    d += chunk(b"IDAT", z[:half]) + chunk(b"IDAT", z[half:]) + chunk(b"IEND", b"")
    save_ok(name, d)


def save_ok(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
    im = Image.open(io.BytesIO(data))
    im.seek(0)
    rgba = im.convert("RGBA").tobytes()
    with open(os.path.join(OUT, "ref", name + ".rgba"), "wb") as f:
        f.write(rgba)
    MANIFEST.append("ok %s" % name)


def save_bad(name, data, code, text):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
    MANIFEST.append("bad %s %d %s" % (name, code, text))


def pil_bytes(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def cjpeg(rgb, *args):
    with tempfile.TemporaryDirectory() as t:
        p = os.path.join(t, "in.ppm")
        Image.fromarray(rgb).save(p)
        return subprocess.run(["cjpeg", *args, p], check=True, capture_output=True).stdout


def gif_lzw(idx, m):
    """Valid LZW without compression: a clear code before the table would widen codes."""
    clear, w, out, acc, nb = 1 << m, m + 1, bytearray(), 0, 0
    codes, run = [clear], 0
    for v in idx:
        if run == (1 << m) - 2:
            codes.append(clear)
            run = 0
        codes.append(int(v))
        run += 1
    codes.append(clear + 1)
    for c in codes:
        acc |= c << nb
        nb += w
        while nb >= 8:
            out.append(acc & 255)
            acc >>= 8
            nb -= 8
    if nb:
        out.append(acc & 255)
    blocks = b"".join(bytes([len(out[i:i + 255])]) + out[i:i + 255]
                      for i in range(0, len(out), 255))
    return bytes([m]) + blocks + b"\0"


def gif_small_frame(name, local, trns, screen=(24, 20)):
    """Screen 24x20, the first frame 10x7 at (5,4); a second frame that must be ignored.
    A smaller screen: the frame reaches past it (Pillow grows the image to hold it)."""
    r = np.random.default_rng(7)
    gpal = r.integers(0, 256, 16 * 3).astype(np.uint8).tobytes()
    d = b"GIF89a" + struct.pack("<HHBBB", *screen, 0xF3, 3, 0) + gpal
    if trns is not None:
        d += b"\x21\xf9\x04" + bytes([1, 0, 0, trns, 0])
    fw, fh = 10, 7
    idx = r.integers(0, 16, fw * fh)
    flags = 0x83 if local else 0
    d += b"\x2c" + struct.pack("<HHHHB", 5, 4, fw, fh, flags)
    if local:
        d += r.integers(0, 256, 16 * 3).astype(np.uint8).tobytes()
    d += gif_lzw(idx, 4)
    d += b"\x2c" + struct.pack("<HHHHB", 0, 0, 24, 20, 0) + gif_lzw([1] * 480, 4) + b"\x3b"
    save_ok(name, d)


def main():
    os.makedirs(os.path.join(OUT, "ref"), exist_ok=True)
    r = np.random.default_rng(37)
    rgb = pattern(19, 13, 1)
    gray = rgb[:, :, :1]
    # PNG: every colour type and depth
    for dpt in (1, 2, 4, 8, 16):
        mx = (1 << dpt) - 1
        g = (gray.astype(np.uint32) * mx // 255).astype(np.uint32)
        if dpt == 16:
            g = r.integers(0, 1024, gray.shape)   # Pillow clips 16-bit gray at 255
        png("png_g%d.png" % dpt, g, 0, dpt)
    png("png_g8_trns.png", gray, 0, 8, trns=struct.pack(">H", int(gray[3, 4, 0])))
    png("png_rgb8.png", rgb, 2, 8)
    png("png_rgb16.png", rgb.astype(np.uint32) * 257 + r.integers(0, 200, rgb.shape), 2, 16)
    png("png_rgb8_trns.png", rgb, 2, 8, trns=struct.pack(">HHH", *map(int, rgb[5, 6])))
    a = r.integers(0, 256, gray.shape)
    png("png_la8.png", np.concatenate([gray, a], 2), 4, 8)
    png("png_la16.png", np.concatenate([gray, a], 2).astype(np.uint32) * 257, 4, 16)
    png("png_rgba8.png", np.concatenate([rgb, a], 2), 6, 8)
    png("png_rgba16.png", np.concatenate([rgb, a], 2).astype(np.uint32) * 251, 6, 16)
    for dpt in (1, 2, 4, 8):
        n = 1 << dpt
        pal = r.integers(0, 256, n * 3)
        png("png_p%d.png" % dpt, r.integers(0, n, (13, 19, 1)), 3, dpt, plte=pal)
    pal = r.integers(0, 256, 40 * 3)
    png("png_p8_trns.png", r.integers(0, 40, (13, 19, 1)), 3, 8, plte=pal,
        trns=bytes(r.integers(0, 256, 25).astype(np.uint8)))
    # Adam7, with passes empty at these sizes too
    png("png_rgb8_adam7.png", pattern(17, 13, 2), 2, 8, interlace=True)
    png("png_p4_adam7.png", r.integers(0, 16, (7, 5, 1)), 3, 4, plte=r.integers(0, 256, 48),
        interlace=True)
    png("png_g1_adam7.png", r.integers(0, 2, (9, 33, 1)), 0, 1, interlace=True)
    png("png_rgba16_adam7.png", r.integers(0, 65536, (6, 11, 4)), 6, 16, interlace=True)
    png("png_1x1_adam7.png", np.array([[[9, 200, 31]]]), 2, 8, interlace=True)
    # deflate's other block types: stored (level 0) and fixed Huffman
    png("png_stored.png", pattern(23, 9, 3), 2, 8, level=0)
    png("png_fixed.png", pattern(23, 9, 4), 2, 8, strategy=zlib.Z_FIXED)
    png("png_33x7.png", pattern(33, 7, 5), 2, 8)
    # tRNS at other depths: Pillow compares its converted 8-bit sample with the raw value
    t = np.random.default_rng(5)
    g2 = t.integers(0, 4, (9, 11, 1))
    png("png_g2_trns.png", g2, 0, 2, trns=struct.pack(">H", 2))
    g16 = t.integers(0, 300, (9, 11, 1))
    png("png_g16_trns.png", g16, 0, 16, trns=struct.pack(">H", int(g16[0, 0, 0])))
    c16 = t.integers(0, 3, (9, 11, 3))
    png("png_rgb16_trns.png", c16, 2, 16, trns=struct.pack(">HHH", *map(int, c16[0, 0])))
    # a 16-bit key over 255: Pillow matches its low byte (279 -> 23) against the clipped sample
    g16b = np.random.default_rng(6).integers(0, 40, (9, 11, 1))
    png("png_g16_trns_low.png", g16b, 0, 16, trns=struct.pack(">H", 279))
    # JPEG
    img = Image.fromarray(pattern(32, 24, 6))
    save_ok("jpg_444.jpg", pil_bytes(img, "JPEG", quality=90, subsampling=0))
    save_ok("jpg_422.jpg", pil_bytes(img, "JPEG", quality=80, subsampling=1))
    save_ok("jpg_420.jpg", pil_bytes(img, "JPEG", quality=75, subsampling=2))
    odd = Image.fromarray(pattern(17, 13, 7))
    save_ok("jpg_420_17x13.jpg", pil_bytes(odd, "JPEG", quality=85, subsampling=2))
    save_ok("jpg_422_17x13.jpg", pil_bytes(odd, "JPEG", quality=85, subsampling=1))
    save_ok("jpg_420_33x7.jpg", pil_bytes(Image.fromarray(pattern(33, 7, 8)), "JPEG",
                                          quality=60, subsampling=2))
    save_ok("jpg_1x1.jpg", pil_bytes(Image.fromarray(pattern(1, 1, 9)), "JPEG", quality=95))
    save_ok("jpg_gray.jpg", pil_bytes(odd.convert("L"), "JPEG", quality=80))
    big = Image.fromarray(pattern(48, 40, 10))
    save_ok("jpg_prog_420.jpg", pil_bytes(big, "JPEG", quality=80, progressive=True))
    save_ok("jpg_prog_444.jpg", pil_bytes(odd, "JPEG", quality=90, progressive=True,
                                          subsampling=0))
    save_ok("jpg_prog_gray.jpg", pil_bytes(odd.convert("L"), "JPEG", quality=70,
                                           progressive=True))
    save_ok("jpg_optimize.jpg", pil_bytes(img, "JPEG", quality=50, optimize=True))
    save_ok("jpg_q100.jpg", pil_bytes(odd, "JPEG", quality=100, subsampling=2))
    p = pattern(35, 21, 11)
    save_ok("jpg_restart.jpg", cjpeg(p, "-quality", "80", "-restart", "1"))
    save_ok("jpg_restart_prog.jpg", cjpeg(p, "-quality", "80", "-restart", "2B",
                                          "-progressive"))
    save_ok("jpg_440.jpg", cjpeg(p, "-quality", "85", "-sample", "1x2"))
    save_ok("jpg_rgb.jpg", cjpeg(p, "-quality", "85", "-rgb"))
    # GIF
    pimg = Image.fromarray(pattern(40, 30, 12)).quantize(64, dither=Image.Dither.NONE)
    save_ok("gif_interlaced.gif", pil_bytes(pimg, "GIF"))
    save_ok("gif_plain.gif", pil_bytes(pimg, "GIF", interlace=False))
    save_ok("gif_trns.gif", pil_bytes(pimg, "GIF", transparency=5, interlace=False))
    gif_small_frame("gif_small_frame.gif", local=False, trns=None)
    gif_small_frame("gif_small_frame_trns.gif", local=True, trns=2)
    gif_small_frame("gif_frame_past_screen.gif", local=False, trns=None, screen=(12, 6))
    # refusals and damage
    save_bad("refuse.webp", pil_bytes(img, "WEBP", quality=50), 1, "looks like WebP")
    save_bad("refuse_cmyk.jpg", pil_bytes(img.convert("CMYK"), "JPEG", quality=70), 1, "CMYK")
    save_bad("refuse.bmp", pil_bytes(Image.fromarray(pattern(8, 8, 13)), "BMP"), 1,
             "looks like BMP")
    good = open(os.path.join(OUT, "png_rgb8.png"), "rb").read()
    save_bad("bad_png_crc.png", good[:60] + bytes([good[60] ^ 1]) + good[61:], 1,
             "CRC does not match")
    save_bad("bad_png_trunc.png", good[:len(good) // 2], 1, "truncated")
    # the zlib stream's adler-32 damaged, the chunk's CRC made right again
    ihdr_end = 8 + 25
    n2 = struct.unpack(">I", good[ihdr_end:ihdr_end + 4])[0]
    first = good[ihdr_end:ihdr_end + 12 + n2]
    rest = good[ihdr_end + 12 + n2:]
    n3 = struct.unpack(">I", rest[:4])[0]
    z2 = bytearray(rest[8:8 + n3])
    z2[-1] ^= 0x55
    save_bad("bad_png_adler.png", good[:ihdr_end] + first + chunk(b"IDAT", bytes(z2)) +
             rest[12 + n3:], 1, "IDAT: zlib data's adler-32 does not match")
    # sizes: over the side limit, and a 8000x8000 IHDR over a few bytes of data
    tiny = zlib.compress(b"\0" * 64)
    for name, w, h, text in (("bad_png_side.png", 20000, 4, "over k3's limit of 16384 a side"),
                             ("bad_png_bomb.png", 8000, 8000, "cannot hold")):
        save_bad(name, b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0,
                 0, 0, 0)) + chunk(b"IDAT", tiny) + chunk(b"IEND", b""), 1, text)
    j = open(os.path.join(OUT, "jpg_420.jpg"), "rb").read()
    save_bad("bad_jpg_trunc.jpg", j[:len(j) - 40], 1, "truncated")  # inside the scan
    gf = open(os.path.join(OUT, "gif_plain.gif"), "rb").read()
    save_bad("bad_gif_trunc.gif", gf[:len(gf) // 2], 1, "truncated")
    save_bad("bad_empty.png", b"", 1, "not an image k3 knows")
    with open(os.path.join(OUT, "manifest.txt"), "w") as f:
        f.write("\n".join(MANIFEST) + "\n")


main()
