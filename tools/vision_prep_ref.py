#!/usr/bin/python3
"""The vision preprocessing of K3_VISION.md §2 in Pillow + NumPy, written from the spec (the
reference's own steps: PIL's resize in the image's mode, the chessboard fill in float32, numpy
padding, float64 normalisation then float32, the patch transpose), and the fixtures that
tests/sh/image_prep.sh checks k3 against (k3 image --rgb / --patches).

    /usr/bin/python3 tools/vision_prep_ref.py            write tests/images/big/*.png|jpg and
                                                         tests/images/prep.txt
    /usr/bin/python3 tools/vision_prep_ref.py FILE [WxH] print the plan and the hashes
    /usr/bin/python3 tools/vision_prep_ref.py --sweep N  compare bin/k3 on N random sizes
                                                         (not a fixture: a wider check)

prep.txt lines: NAME SIZE SHA_RGB SHA_PATCHES, SIZE = "plan" (the budget rule) or WxH (the
--resize override); the hashes are SHA-256 of the bytes k3 must write: the RGB at the
resized size (before padding), and the float32 patches in native (little-endian) order.
Both must be equal, not close: every step is integer or one IEEE rounding per operation.
"""
import hashlib, io, math, os, subprocess, sys, tempfile
import numpy as np
from PIL import Image

D = "tests/images"
P, K, LIM, SIDE = 14, 2, 65536, 512


def plan(w, h):
    """§2.2 navit_resize_image: (nw, nh) in double arithmetic, as the reference."""
    s1 = math.sqrt(LIM / (max(1.0, w // P) * max(1.0, h // P)))
    s2 = SIDE * P / w
    s3 = SIDE * P / h
    scale = min(1.0, s1, s2, s3)
    nw = min(max(1, int(w * scale)), SIDE * P)
    nh = min(max(1, int(h * scale)), SIDE * P)
    return nw, nh


def fill(image):
    """§2.4, transparent_bg_fill_stage after_resize, chessboard 8 / 255 / 180 / white top left."""
    if image.mode == "RGB":
        return image
    if "A" not in image.getbands() and "transparency" not in image.info:
        return image.convert("RGB")
    img = np.asarray(image.convert("RGBA"))
    h, w = img.shape[:2]
    bg = np.full((h, w, 3), 255, dtype=np.uint8)
    for y in range(0, h, 8):
        for x in range(0, w, 8):
            if (y // 8 + x // 8) % 2 == 1:
                bg[y:y + 8, x:x + 8] = 180
    alpha = img[:, :, 3:4].astype(np.float32) / 255.0
    out = alpha * img[:, :, :3] + (1 - alpha) * bg
    return Image.fromarray(out.astype(np.uint8))


def preprocess(path, size=None):
    """(rgb uint8 [nh][nw][3], patches float32 [L][588], (gh, gw)) for one file."""
    image = Image.open(path)
    image.load()
    nw, nh = size or plan(*image.size)
    image = image.resize((nw, nh), resample=Image.BICUBIC)   # a copy when the size is kept
    rgb = np.asarray(fill(image), dtype=np.uint8)
    f = P * K
    pw, ph = (f - nw % f) % f, (f - nh % f) % f
    padded = np.pad(rgb, ((0, ph), (0, pw), (0, 0)), mode="constant", constant_values=0)
    x = (padded / 255.0).astype(np.float32)
    x = ((x - np.array([0.5, 0.5, 0.5])) * (1.0 / np.array([0.5, 0.5, 0.5]))).astype(np.float32)
    gh, gw = (nh + ph) // P, (nw + pw) // P
    x = x.reshape(gh, P, gw, P, 3).transpose(0, 2, 4, 1, 3).reshape(gh * gw, 3 * P * P)
    return rgb, np.ascontiguousarray(x, dtype="<f4"), (gh, gw)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def compressible(w, h, seed, mode):
    """A large image that compresses to a few KB: smooth ramps plus a few sharp bars (the
    bicubic's negative lobes and clipping matter there), in the given mode."""
    r = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([(x * 7 // 5) % 256, (y * 3 + x // 64) % 256, ((x // 37 + y // 29) % 2) * 255],
                   axis=-1).astype(np.uint8)
    for _ in range(6):
        x0, y0 = r.integers(0, w), r.integers(0, h)
        img[y0:y0 + h // 9 + 1, x0:x0 + w // 11 + 1] = r.integers(0, 256, 3)
    im = Image.fromarray(img)
    if mode == "RGBA":
        a = ((x // 50 + y // 7) % 4 * 85).astype(np.uint8)
        im.putalpha(Image.fromarray(a))
    elif mode == "L":   # blocks and bars only: a 13 Mpx file of a few KB
        g = ((x // 37 + y // 29) % 2 * 200 + (x // 500 % 3) * 20).astype(np.uint8)
        g[(y % 97) < 3] = 9
        im = Image.fromarray(g)
    elif mode == "P":
        im = im.convert("P", palette=Image.ADAPTIVE, colors=16)
    return im


# the corpus files the override sizes run on: one of each mode and transparency kind
RESIZE_FILES = ["png_rgb8.png", "png_rgba8.png", "png_la8.png", "png_g8.png", "png_g8_trns.png",
                "png_g2_trns.png", "png_p8.png", "png_p8_trns.png", "png_g1.png", "png_g16.png",
                "png_rgb8_trns.png", "gif_trns.gif", "png_g16_trns_low.png",
                "jpg_420_17x13.jpg", "jpg_prog_420.jpg", "gif_small_frame_trns.gif"]


def override_sizes(w, h):
    """down, strongly down, up, one axis only each way, and 1x1"""
    return [(max(1, w * 2 // 3), max(1, h * 2 // 3)), (max(1, w // 4 + 1), max(1, h // 3 + 1)),
            (w * 2 + 3, h + 5), (w, max(1, h // 2)), (max(1, w // 2), h), (1, 1)]


def fixtures():
    # in big/: the decoders' fuzzer (tests/c/test_fuzz_image.c) seeds from tests/images/ only
    big = [("big/big_rgb_wide.png", 7301, 23, "RGB"), ("big/big_rgba_wide.png", 7250, 19, "RGBA"),
           ("big/big_l_budget.png", 3650, 3601, "L"), ("big/big_p_tall.png", 17, 7200, "P")]
    for name, w, h, mode in big:
        compressible(w, h, len(name), mode).save(os.path.join(D, name), optimize=True)
    b = io.BytesIO()
    compressible(7400, 30, 7, "RGB").save(b, "JPEG", quality=60)
    open(os.path.join(D, "big/big_jpg_wide.jpg"), "wb").write(b.getvalue())
    names = sorted(l.split()[1] for l in open(os.path.join(D, "manifest.txt"))
                   if l.startswith("ok "))
    names += [n for n, *_ in big] + ["big/big_jpg_wide.jpg"]
    lines = []
    for n in names:
        rgb, pv, _ = preprocess(os.path.join(D, n))
        lines.append(f"{n} plan {sha(rgb.tobytes())} {sha(pv.tobytes())}")
    for n in RESIZE_FILES:
        w, h = Image.open(os.path.join(D, n)).size
        for s in override_sizes(w, h):
            rgb, pv, _ = preprocess(os.path.join(D, n), s)
            lines.append(f"{n} {s[0]}x{s[1]} {sha(rgb.tobytes())} {sha(pv.tobytes())}")
    with open(os.path.join(D, "prep.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(lines)} lines in {D}/prep.txt")


def sweep(n):
    """Random sizes on every RESIZE_FILES image against bin/k3 --resize: a wider net than the
    fixtures (prints the mismatches)."""
    r = np.random.default_rng(1)
    bad = 0
    with tempfile.TemporaryDirectory() as t:
        for i in range(n):
            name = RESIZE_FILES[i % len(RESIZE_FILES)]
            w, h = Image.open(os.path.join(D, name)).size
            s = (int(r.integers(1, 3 * w)), int(r.integers(1, 3 * h)))
            rgb, pv, _ = preprocess(os.path.join(D, name), s)
            subprocess.run(["bin/k3", "image", os.path.join(D, name), "--resize", f"{s[0]}x{s[1]}",
                            "--rgb", t + "/rgb", "--patches", t + "/pv"], check=True,
                           stdout=subprocess.DEVNULL)
            if open(t + "/rgb", "rb").read() != rgb.tobytes() or \
               open(t + "/pv", "rb").read() != pv.tobytes():
                bad += 1
                print("MISMATCH", name, s)
    print(f"{n - bad}/{n} equal")
    return bad


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--sweep":
        sys.exit(1 if sweep(int(sys.argv[2])) else 0)
    if len(sys.argv) > 1:
        s = tuple(map(int, sys.argv[2].split("x"))) if len(sys.argv) > 2 else None
        rgb, pv, g = preprocess(sys.argv[1], s)
        print(f"resized {rgb.shape[1]}x{rgb.shape[0]} grid {g[0]}x{g[1]} "
              f"rgb {sha(rgb.tobytes())} patches {sha(pv.tobytes())}")
    else:
        fixtures()
