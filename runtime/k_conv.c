/* runtime/k_conv.c: conv2d (im2col + OpenBLAS sgemm) and max/avg pooling
 * on NCHW boxes, forward and backward, with the window geometry helper for
 * spatially sharded boxes (halo rows/cols + local padding).
 * Not here: grouped/dilated convolution, oneDNN, GPU kernels. */
#include "shardbench/kernels.h"

#include <float.h>
#include <string.h>

void sb_window_input_range(int out_lo, int out_hi, int window, int stride,
                           int pad, int in_full, int *in_lo, int *in_hi,
                           int *pad_local)
{
    if (out_hi <= out_lo) { // nothing to compute, nothing to read
        *in_lo = *in_hi = 0;
        *pad_local = 0;
        return;
    }
    int first = out_lo * stride - pad;             // first row read
    int last = (out_hi - 1) * stride - pad + window; // one past the last
    int lo = first < 0 ? 0 : first;
    int hi = last > in_full ? in_full : last;
    if (hi < lo)
        hi = lo;
    *in_lo = lo;
    *in_hi = hi;
    *pad_local = lo - first; // local row = global row - lo
}

size_t sb_conv2d_work_floats(int C, int R, int S, int N, int H_out, int W_out)
{
    size_t hw = (size_t)H_out * W_out;
    return (size_t)C * R * S * hw + (size_t)N * hw;
}

// 1x1, stride 1, no padding, same extent: the image itself is the im2col matrix
static int conv_is_direct(int H_in, int W_in, int R, int S, int sh, int sw,
                          int pt, int pl, int H_out, int W_out)
{
    return R == 1 && S == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 &&
           H_out == H_in && W_out == W_in;
}

// col (C*R*S, H_out*W_out) from img (C,H_in,W_in); outside the image reads 0
static void im2col(float *col, const float *img, int C, int H_in, int W_in,
                   int R, int S, int sh, int sw, int pt, int pl, int H_out,
                   int W_out)
{
    size_t hw = (size_t)H_out * W_out;
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++)
            for (int s = 0; s < S; s++) {
                float *row = col + ((size_t)(c * R + r) * S + s) * hw;
                for (int y = 0; y < H_out; y++) {
                    float *dst = row + (size_t)y * W_out;
                    int iy = y * sh - pt + r;
                    if (iy < 0 || iy >= H_in) {
                        memset(dst, 0, sizeof(float) * (size_t)W_out);
                        continue;
                    }
                    const float *src = img + ((size_t)c * H_in + iy) * W_in;
                    for (int x = 0; x < W_out; x++) {
                        int ix = x * sw - pl + s;
                        dst[x] = (ix >= 0 && ix < W_in) ? src[ix] : 0.0f;
                    }
                }
            }
}

// img (C,H_in,W_in) += scatter of col (C*R*S, H_out*W_out)
static void col2im_add(float *img, const float *col, int C, int H_in, int W_in,
                       int R, int S, int sh, int sw, int pt, int pl, int H_out,
                       int W_out)
{
    size_t hw = (size_t)H_out * W_out;
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++)
            for (int s = 0; s < S; s++) {
                const float *row = col + ((size_t)(c * R + r) * S + s) * hw;
                for (int y = 0; y < H_out; y++) {
                    int iy = y * sh - pt + r;
                    if (iy < 0 || iy >= H_in)
                        continue;
                    const float *src = row + (size_t)y * W_out;
                    float *dst = img + ((size_t)c * H_in + iy) * W_in;
                    for (int x = 0; x < W_out; x++) {
                        int ix = x * sw - pl + s;
                        if (ix >= 0 && ix < W_in)
                            dst[ix] += src[x];
                    }
                }
            }
}

// dst (n) = dout where out > 0, else 0 (the relu-masked gradient)
static void relu_mask(float *dst, const float *dout, const float *out,
                      size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}

void sb_conv2d_forward(float *out, const float *inp, const float *w,
                       const float *bias, float *work, int B, int C, int H_in,
                       int W_in, int N, int R, int S, int stride_h,
                       int stride_w, int pad_top, int pad_left, int H_out,
                       int W_out, int relu)
{
    int crs = C * R * S, hw = H_out * W_out;
    size_t in_img = (size_t)C * H_in * W_in, out_img = (size_t)N * hw;
    int direct = conv_is_direct(H_in, W_in, R, S, stride_h, stride_w, pad_top,
                                pad_left, H_out, W_out);
    for (int b = 0; b < B; b++) {
        const float *img = inp + b * in_img;
        float *o = out + b * out_img;
        const float *col = img;
        if (!direct) {
            im2col(work, img, C, H_in, W_in, R, S, stride_h, stride_w,
                   pad_top, pad_left, H_out, W_out);
            col = work;
        }
        // o (N,HW) = w (N,CRS) col (CRS,HW)
        sb_gemm(0, 0, N, hw, crs, 1.0f, w, crs, col, hw, 0.0f, o, hw);
        for (int n = 0; n < N; n++) {
            float *on = o + (size_t)n * hw;
            float bn = bias ? bias[n] : 0.0f;
            for (int i = 0; i < hw; i++) {
                float v = on[i] + bn;
                on[i] = (relu && v < 0.0f) ? 0.0f : v;
            }
        }
    }
}

void sb_conv2d_backward_data(float *dinp, float *work, const float *dout,
                             const float *out, const float *w, int B, int C,
                             int H_in, int W_in, int N, int R, int S,
                             int stride_h, int stride_w, int pad_top,
                             int pad_left, int H_out, int W_out)
{
    int crs = C * R * S, hw = H_out * W_out;
    size_t in_img = (size_t)C * H_in * W_in, out_img = (size_t)N * hw;
    float *dcol = work, *dmask = work + (size_t)crs * hw;
    int direct = conv_is_direct(H_in, W_in, R, S, stride_h, stride_w, pad_top,
                                pad_left, H_out, W_out);
    for (int b = 0; b < B; b++) {
        const float *dy = dout + b * out_img;
        if (out) {
            relu_mask(dmask, dy, out + b * out_img, out_img);
            dy = dmask;
        }
        float *di = dinp + b * in_img;
        // dcol (CRS,HW) = w^T (CRS,N) dy (N,HW)
        if (direct) {
            sb_gemm(1, 0, crs, hw, N, 1.0f, w, crs, dy, hw, 1.0f, di, hw);
        } else {
            sb_gemm(1, 0, crs, hw, N, 1.0f, w, crs, dy, hw, 0.0f, dcol, hw);
            col2im_add(di, dcol, C, H_in, W_in, R, S, stride_h, stride_w,
                       pad_top, pad_left, H_out, W_out);
        }
    }
}

void sb_conv2d_backward_filter(float *dw, float *dbias, float *work,
                               const float *dout, const float *out,
                               const float *inp, int B, int C, int H_in,
                               int W_in, int N, int R, int S, int stride_h,
                               int stride_w, int pad_top, int pad_left,
                               int H_out, int W_out)
{
    int crs = C * R * S, hw = H_out * W_out;
    size_t in_img = (size_t)C * H_in * W_in, out_img = (size_t)N * hw;
    float *col = work, *dmask = work + (size_t)crs * hw;
    int direct = conv_is_direct(H_in, W_in, R, S, stride_h, stride_w, pad_top,
                                pad_left, H_out, W_out);
    for (int b = 0; b < B; b++) {
        const float *dy = dout + b * out_img;
        if (out) {
            relu_mask(dmask, dy, out + b * out_img, out_img);
            dy = dmask;
        }
        if (dw) {
            const float *cm = inp + b * in_img;
            if (!direct) {
                im2col(col, cm, C, H_in, W_in, R, S, stride_h, stride_w,
                       pad_top, pad_left, H_out, W_out);
                cm = col;
            }
            // dw (N,CRS) += dy (N,HW) col^T (HW,CRS)
            sb_gemm(0, 1, N, crs, hw, 1.0f, dy, hw, cm, hw, 1.0f, dw, crs);
        }
        if (dbias)
            for (int n = 0; n < N; n++) {
                const float *dn = dy + (size_t)n * hw;
                float acc = 0.0f;
                for (int i = 0; i < hw; i++)
                    acc += dn[i];
                dbias[n] += acc;
            }
    }
}

/* ---- pooling ---- */

// first maximum of the window at output (y,x) of one plane; -1 if empty
static ptrdiff_t window_argmax(const float *plane, int H_in, int W_in, int R,
                               int S, int y0, int x0)
{
    ptrdiff_t arg = -1;
    float best = -FLT_MAX;
    for (int r = 0; r < R; r++) {
        int iy = y0 + r;
        if (iy < 0 || iy >= H_in)
            continue;
        for (int s = 0; s < S; s++) {
            int ix = x0 + s;
            if (ix < 0 || ix >= W_in)
                continue;
            ptrdiff_t at = (ptrdiff_t)iy * W_in + ix;
            if (arg < 0 || plane[at] > best) {
                best = plane[at];
                arg = at;
            }
        }
    }
    return arg;
}

void sb_maxpool2d_forward(float *out, const float *inp, int B, int C,
                          int H_in, int W_in, int R, int S, int stride_h,
                          int stride_w, int pad_top, int pad_left, int H_out,
                          int W_out)
{
    size_t in_plane = (size_t)H_in * W_in, out_plane = (size_t)H_out * W_out;
    for (size_t p = 0; p < (size_t)B * C; p++) {
        const float *ip = inp + p * in_plane;
        float *op = out + p * out_plane;
        for (int y = 0; y < H_out; y++)
            for (int x = 0; x < W_out; x++) {
                ptrdiff_t a = window_argmax(ip, H_in, W_in, R, S,
                                            y * stride_h - pad_top,
                                            x * stride_w - pad_left);
                op[(size_t)y * W_out + x] = a < 0 ? 0.0f : ip[a];
            }
    }
}

void sb_maxpool2d_backward(float *dinp, const float *dout, const float *inp,
                           int B, int C, int H_in, int W_in, int R, int S,
                           int stride_h, int stride_w, int pad_top,
                           int pad_left, int H_out, int W_out)
{
    size_t in_plane = (size_t)H_in * W_in, out_plane = (size_t)H_out * W_out;
    for (size_t p = 0; p < (size_t)B * C; p++) {
        const float *ip = inp + p * in_plane;
        const float *dp = dout + p * out_plane;
        float *gp = dinp + p * in_plane;
        for (int y = 0; y < H_out; y++)
            for (int x = 0; x < W_out; x++) {
                ptrdiff_t a = window_argmax(ip, H_in, W_in, R, S,
                                            y * stride_h - pad_top,
                                            x * stride_w - pad_left);
                if (a >= 0)
                    gp[a] += dp[(size_t)y * W_out + x];
            }
    }
}

// clamp the window [y0, y0+R) to [0, H): *lo, *hi
static void clamp_window(int y0, int R, int H, int *lo, int *hi)
{
    *lo = y0 < 0 ? 0 : y0;
    *hi = y0 + R > H ? H : y0 + R;
    if (*hi < *lo)
        *hi = *lo;
}

void sb_avgpool2d_forward(float *out, const float *inp, int B, int C,
                          int H_in, int W_in, int R, int S, int stride_h,
                          int stride_w, int pad_top, int pad_left, int H_out,
                          int W_out, int count_pad)
{
    size_t in_plane = (size_t)H_in * W_in, out_plane = (size_t)H_out * W_out;
    for (size_t p = 0; p < (size_t)B * C; p++) {
        const float *ip = inp + p * in_plane;
        float *op = out + p * out_plane;
        for (int y = 0; y < H_out; y++)
            for (int x = 0; x < W_out; x++) {
                int ylo, yhi, xlo, xhi;
                clamp_window(y * stride_h - pad_top, R, H_in, &ylo, &yhi);
                clamp_window(x * stride_w - pad_left, S, W_in, &xlo, &xhi);
                float acc = 0.0f;
                for (int iy = ylo; iy < yhi; iy++)
                    for (int ix = xlo; ix < xhi; ix++)
                        acc += ip[(size_t)iy * W_in + ix];
                int cnt = count_pad ? R * S : (yhi - ylo) * (xhi - xlo);
                op[(size_t)y * W_out + x] = cnt > 0 ? acc / (float)cnt : 0.0f;
            }
    }
}

void sb_avgpool2d_backward(float *dinp, const float *dout, int B, int C,
                           int H_in, int W_in, int R, int S, int stride_h,
                           int stride_w, int pad_top, int pad_left, int H_out,
                           int W_out, int count_pad)
{
    size_t in_plane = (size_t)H_in * W_in, out_plane = (size_t)H_out * W_out;
    for (size_t p = 0; p < (size_t)B * C; p++) {
        const float *dp = dout + p * out_plane;
        float *gp = dinp + p * in_plane;
        for (int y = 0; y < H_out; y++)
            for (int x = 0; x < W_out; x++) {
                int ylo, yhi, xlo, xhi;
                clamp_window(y * stride_h - pad_top, R, H_in, &ylo, &yhi);
                clamp_window(x * stride_w - pad_left, S, W_in, &xlo, &xhi);
                int cnt = count_pad ? R * S : (yhi - ylo) * (xhi - xlo);
                if (cnt <= 0)
                    continue;
                float g = dp[(size_t)y * W_out + x] / (float)cnt;
                for (int iy = ylo; iy < yhi; iy++)
                    for (int ix = xlo; ix < xhi; ix++)
                        gp[(size_t)iy * W_in + ix] += g;
            }
    }
}
