// SPDX-License-Identifier: GPL-2.0
/*
 * tgen's XDP live-frame sender (tx_path: xdp).
 *
 * User space runs ``tgen_live`` with BPF_PROG_RUN and BPF_F_TEST_XDP_LIVE_FRAMES: the
 * kernel runs it ``repeat`` times on one page-pool copy of the stream's template (the
 * batch builder's fixed-size template: lengths, magic and stream index written) and
 * transmits each result (XDP_TX = a redirect out of the ingress device). Recycled pages
 * keep what was last written to them, by this program and by whoever received the frame
 * (a DUT on this host forwards the very page: it rewrites the MACs, the TTL, NAT's
 * addresses and ports), so every frame is first copied whole from the stream's template
 * (tgen_tmpl), then gets its field ops, the signature's sequence number and
 * CLOCK_MONOTONIC stamp, and its checksums.
 *
 * Frame i of a call is stream frame ``ctl.start + ctl.count`` (ctl.count counts the
 * frames this program produced: the syscall gives no per-frame count). The field ops
 * are the batch builder's (tgen_tui.packets.batch): fixed, inc, dec, random (the RFC 4814
 * counter-based PRNG: splitmix64), unique (the keyed Feistel permutation with cycle
 * walking) and table (a column of the learned-tuple table, row order fixed/inc/dec/
 * random). The checksums are fixed incrementally the way BatchBuilder._build_fixed does
 * it: a constant word sum precomputed from the template plus the frame's varying words.
 *
 * Two tracing programs count what the kernel did with the frames of the call running on
 * this CPU: xdp_devmap_xmit (sent, dropped: e.g. a veth peer without NAPI, a full ring)
 * and xdp_redirect_err (a redirect refused before the driver).
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define MAX_STREAMS 64
#define MAX_FIELDS 8
#define MAX_WORDS 48
#define MAX_UNIQUE 8
#define MAX_WALK 256
#define OFF_MASK 0xfff
#define TABLE_ROWS (1 << 18)
#define TMPL_MAX 3584 /* a live frame fits a page less XDP headroom and skb tailroom */

enum { M_FIXED, M_INC, M_DEC, M_RANDOM, M_UNIQUE, M_TABLE };
enum { T_FIXED, T_INC, T_DEC, T_RANDOM };

struct field {
	__u64 min;
	__u64 max;
	__u64 span; /* 0: 2**64 */
	__u64 step;
	__u64 key;
	__u16 offset;
	__u8 width;
	__u8 mode;
	__u8 column;
	__u8 csum; /* with stream.by_value: 1 IPv4 header, 2 L4 */
	__u8 pad[2];
};

struct stream {
	__u32 len;
	__u32 sig_off;
	__u32 nfields;
	__u32 ip_csum_off; /* 0xffff: constant header (its checksum is in the template) */
	__u32 l4_csum_off; /* 0xffff: none */
	__u32 udp;
	__u32 n_ip_words;
	__u32 n_l4_words;
	__u64 ip_const;
	__u64 l4_const;
	__u32 n_unique;
	__u32 perm_half;
	__u64 perm_n; /* 0: 2**64 */
	__u64 perm_mask;
	__u64 perm_keys[4];
	__u8 unique_idx[MAX_UNIQUE]; /* field indexes, the last varies fastest */
	__u32 table_base;
	__u32 table_rows;
	__u32 table_order;
	__u32 by_value; /* the varying words are exactly the fields' (even offsets and widths)
			 * and the signature's: sum the values, do not read the words back */
	__u64 table_key;
	struct field f[MAX_FIELDS];
	__u16 ip_words[MAX_WORDS]; /* byte offsets of the varying words */
	__u16 l4_words[MAX_WORDS];
};

struct ctl {
	__u64 slot;
	__u64 start;
	__u64 count; /* frames produced in this call */
	__u64 ifindex;
	__u64 active;
	__u64 cpu;
	__u64 xmit_sent;
	__u64 xmit_drops;
	__u64 xmit_err; /* the last error of a devmap flush that dropped frames */
	__u64 xmit_calls;
	__u64 redirect_err;
	__u64 redirect_err_last;
	__u64 walk_overflow;
	__u64 bad_len;
};

/* one global (the .bss map, mmapped by user space): the control block, then the streams */
struct sink {
	__u64 ok; /* frames that arrived with the expected first 12 bytes (the MACs) */
	__u64 bad;
	__u8 want[16];
};

struct state {
	struct ctl ctl;
	struct stream streams[MAX_STREAMS];
	struct sink sink; /* tgen_check's (tests) */
} st = {};

#define ctl st.ctl
#define streams st.streams

struct row {
	__u32 col[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, TABLE_ROWS);
	__type(key, __u32);
	__type(value, struct row);
} tgen_table SEC(".maps");

struct tmpl {
	__u8 b[TMPL_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MAX_STREAMS);
	__type(key, __u32);
	__type(value, struct tmpl);
} tgen_tmpl SEC(".maps");

#define GOLDEN 0x9E3779B97F4A7C15ULL

static __always_inline __u64 splitmix64(__u64 z)
{
	z += GOLDEN;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static __always_inline __u64 hash_index(__u64 key, __u64 idx)
{
	return splitmix64((idx * GOLDEN) ^ key);
}

/* prng.uniform_int: [lo, lo+span) (span 0: the whole 64-bit space) */
static __always_inline __u64 uniform(__u64 key, __u64 idx, __u64 lo, __u64 span)
{
	__u64 h = hash_index(key, idx);

	if (span == 1)
		return lo;
	if (span == 0)
		return h + lo;
	if (span <= (1ULL << 32))
		return (((h >> 32) * span) >> 32) + lo;
	return h % span + lo;
}

static __always_inline __u64 feistel(struct stream *s, __u64 x)
{
	__u64 h = s->perm_half & 63, m = s->perm_mask;
	__u64 left = x >> h, right = x & m, f, t;

#pragma unroll
	for (int r = 0; r < 4; r++) {
		f = splitmix64(right ^ s->perm_keys[r]) & m;
		t = left ^ f;
		left = right;
		right = t;
	}
	return (left << h) | right;
}

static __always_inline __u64 permute(struct stream *s, __u64 idx)
{
	__u64 n = s->perm_n, y;

	if (n == 0)
		return feistel(s, idx);
	idx %= n;
	if (n == 1)
		return idx;
	y = feistel(s, idx);
	for (int i = 0; i < MAX_WALK && y >= n; i++)
		y = feistel(s, y);
	if (y >= n) {
		__sync_fetch_and_add(&ctl.walk_overflow, 1);
		y %= n;
	}
	return y;
}

static __always_inline __u64 fold16(__u64 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (s & 0xffff) + (s >> 16);
}

SEC("xdp")
int tgen_live(struct xdp_md *xdp)
{
	__u8 *data = (void *)(long)xdp->data;
	__u8 *end = (void *)(long)xdp->data_end;
	__u64 vals[MAX_FIELDS] = {};
	__u64 idx, row = 0;
	struct stream *s;
	__u32 slot = ctl.slot & (MAX_STREAMS - 1);
	__u32 nf, off;
	__u8 *p;

	s = &streams[slot];
	idx = ctl.start + ctl.count;
	if (!ctl.count) /* a call runs on one CPU: its tracepoints are the ones there */
		ctl.cpu = bpf_get_smp_processor_id();
	ctl.count++;
	if (data + s->len > end || s->len < 16) {
		ctl.bad_len++;
		return XDP_ABORTED;
	}
	/* the whole template first: the page may hold what a receiver wrote into it. A
	 * minimum-size frame's first 56 bytes in straight-line stores under one bounds check,
	 * not one check per word of the loop below (213 -> 194 ns per frame for the whole
	 * program on a 60 B frame, benchmarks/xdp_live.py) */
	{
		struct tmpl *t = bpf_map_lookup_elem(&tgen_tmpl, &slot);
		__u32 nw = s->len / 8, i0 = 0;

		if (!t)
			return XDP_ABORTED;
		if (nw >= 7 && data + 56 <= end) {
			__u64 *d = (__u64 *)data, *w = (__u64 *)t->b;

			d[0] = w[0];
			d[1] = w[1];
			d[2] = w[2];
			d[3] = w[3];
			d[4] = w[4];
			d[5] = w[5];
			d[6] = w[6];
			i0 = 7;
		}
		for (__u32 i = i0; i < TMPL_MAX / 8; i++) {
			if (i >= nw)
				break;
			off = i * 8;
			p = data + off;
			if (p + 8 > end)
				return XDP_ABORTED;
			*(__u64 *)p = *(__u64 *)&t->b[off];
		}
		off = s->len - 8; /* the tail: the last 8 bytes again (len >= 16) */
		if (off > TMPL_MAX - 8)
			return XDP_ABORTED;
		p = data + off;
		if (p + 8 > end)
			return XDP_ABORTED;
		*(__u64 *)p = *(__u64 *)&t->b[off];
	}
	nf = s->nfields;
	if (nf > MAX_FIELDS)
		nf = MAX_FIELDS;

	/* unique: one permuted index decoded into each unique field, the last fastest */
	if (s->n_unique) {
		__u64 flat = permute(s, idx);
		__u32 nu = s->n_unique;

		for (int j = MAX_UNIQUE - 1; j >= 0; j--) {
			__u32 fi;
			struct field *f;

			if ((__u32)j >= nu)
				continue;
			fi = s->unique_idx[j] & (MAX_FIELDS - 1);
			f = &s->f[fi];
			if (f->span == 0) {
				vals[fi] = flat + f->min;
				flat = 0;
				continue;
			}
			vals[fi] = flat % f->span + f->min;
			flat = flat / f->span;
		}
	}
	if (s->table_rows) {
		__u64 m = s->table_rows;

		switch (s->table_order) {
		case T_INC:
			row = idx % m;
			break;
		case T_DEC:
			row = m - 1 - idx % m;
			break;
		case T_RANDOM:
			row = uniform(s->table_key, idx, 0, m);
			break;
		default:
			row = 0;
		}
		row += s->table_base;
	}

	__u64 ip_sum = s->ip_const, l4_sum = s->l4_const;

	for (__u32 i = 0; i < MAX_FIELDS; i++) {
		struct field *f = &s->f[i];
		__u64 v, o, w;

		if (i >= nf)
			break;
		switch (f->mode) {
		case M_FIXED:
			v = f->min;
			break;
		case M_INC:
		case M_DEC:
			o = idx * f->step;
			if (f->span)
				o %= f->span;
			v = f->mode == M_INC ? f->min + o : f->max - o;
			break;
		case M_RANDOM:
			v = uniform(f->key, idx, f->min, f->span);
			break;
		case M_TABLE: {
			__u32 k = row;
			struct row *r = bpf_map_lookup_elem(&tgen_table, &k);

			v = r ? r->col[f->column & 3] : 0;
			break;
		}
		default: /* unique: decoded above */
			v = vals[i];
		}
		if (f->csum) {
			w = f->width == 2 ? (v & 0xffff) : (v & 0xffff) + ((v >> 16) & 0xffff);
			if (f->width == 8)
				w += ((v >> 32) & 0xffff) + (v >> 48);
			if (f->csum & 1)
				ip_sum += w;
			if (f->csum & 2)
				l4_sum += w;
		}
		off = f->offset & OFF_MASK;
		p = data + off;
		if (p + 8 > end)
			return XDP_ABORTED;
		switch (f->width) { /* big-endian, one store (x86: unaligned is fine) */
		case 1:
			p[0] = v;
			break;
		case 2:
			*(__u16 *)p = __builtin_bswap16(v);
			break;
		case 4:
			*(__u32 *)p = __builtin_bswap32(v);
			break;
		default:
			*(__u64 *)p = __builtin_bswap64(v);
		}
	}

	/* the signature: seq and the CLOCK_MONOTONIC transmit stamp (little-endian) */
	off = (s->sig_off + 4) & OFF_MASK;
	p = data + off;
	if (p + 8 > end)
		return XDP_ABORTED;
	{
		__u32 seq = idx, ts = bpf_ktime_get_ns();

		*(__u64 *)p = seq | ((__u64)ts << 32); /* little-endian, as the signature is */
		/* the words as read big-endian: byte-swapped halves of the little-endian values */
		l4_sum += __builtin_bswap16(seq) + __builtin_bswap16(seq >> 16) +
			  __builtin_bswap16(ts) + __builtin_bswap16(ts >> 16);
	}
	if (s->by_value) {
		if (s->ip_csum_off != 0xffff) {
			ip_sum = ~fold16(ip_sum) & 0xffff;
			p = data + (s->ip_csum_off & OFF_MASK);
			if (p + 2 > end)
				return XDP_ABORTED;
			p[0] = ip_sum >> 8;
			p[1] = ip_sum;
		}
		if (s->l4_csum_off != 0xffff) {
			l4_sum = ~fold16(l4_sum) & 0xffff;
			if (s->udp && l4_sum == 0)
				l4_sum = 0xffff;
			p = data + (s->l4_csum_off & OFF_MASK);
			if (p + 2 > end)
				return XDP_ABORTED;
			p[0] = l4_sum >> 8;
			p[1] = l4_sum;
		}
		return XDP_TX;
	}

	/* checksums: the template's constant words + the frame's varying words */
	if (s->ip_csum_off != 0xffff) {
		__u64 sum = s->ip_const;
		__u32 n = s->n_ip_words;

		for (__u32 i = 0; i < MAX_WORDS; i++) {
			if (i >= n)
				break;
			p = data + (s->ip_words[i] & OFF_MASK);
			if (p + 2 > end)
				return XDP_ABORTED;
			sum += ((__u32)p[0] << 8) | p[1];
		}
		sum = ~fold16(sum) & 0xffff;
		p = data + (s->ip_csum_off & OFF_MASK);
		if (p + 2 > end)
			return XDP_ABORTED;
		p[0] = sum >> 8;
		p[1] = sum;
	}
	if (s->l4_csum_off != 0xffff) {
		__u64 sum = s->l4_const;
		__u32 n = s->n_l4_words;

		for (__u32 i = 0; i < MAX_WORDS; i++) {
			if (i >= n)
				break;
			off = s->l4_words[i] & OFF_MASK;
			p = data + off;
			if (off + 1 >= s->len) {
				/* the last word of an odd-length frame: its one byte */
				if (p + 1 > end)
					return XDP_ABORTED;
				sum += (__u32)p[0] << 8;
				continue;
			}
			if (p + 2 > end)
				return XDP_ABORTED;
			sum += ((__u32)p[0] << 8) | p[1];
		}
		sum = ~fold16(sum) & 0xffff;
		if (s->udp && sum == 0)
			sum = 0xffff;
		p = data + (s->l4_csum_off & OFF_MASK);
		if (p + 2 > end)
			return XDP_ABORTED;
		p[0] = sum >> 8;
		p[1] = sum;
	}
	return XDP_TX;
}

/* a program for the DUT side of a veth (the lab): NAPI on, every frame to the stack */
SEC("xdp")
int tgen_pass(struct xdp_md *xdp)
{
	return XDP_PASS;
}

/* a checking sink for tests: counts frames whose MACs are st.sink.want, then scribbles
 * over them and drops the frame, whose page goes back to the sender's page pool: the
 * sender's next frames from that page must not carry the scribble */
SEC("xdp")
int tgen_check(struct xdp_md *xdp)
{
	__u8 *data = (void *)(long)xdp->data;
	__u8 *end = (void *)(long)xdp->data_end;
	int same = 1;

	if (data + 14 > end)
		return XDP_DROP;
#pragma unroll
	for (int i = 0; i < 12; i++) {
		if (data[i] != st.sink.want[i])
			same = 0;
		data[i] = 0xee;
	}
	if (same)
		__sync_fetch_and_add(&st.sink.ok, 1);
	else
		__sync_fetch_and_add(&st.sink.bad, 1);
	return XDP_DROP;
}

/* a sink for benchmarks: NAPI on a veth, every frame dropped at once */
SEC("xdp")
int tgen_drop(struct xdp_md *xdp)
{
	return XDP_DROP;
}

struct bpf_prog;

struct net_device {
	int ifindex;
} __attribute__((preserve_access_index));

SEC("tp_btf/xdp_devmap_xmit")
int BPF_PROG(tgen_xmit, const struct net_device *from_dev, const struct net_device *to_dev,
	     int sent, int drops, int err)
{
	if (!ctl.active || ctl.cpu != bpf_get_smp_processor_id())
		return 0;
	if ((__u64)to_dev->ifindex != ctl.ifindex)
		return 0;
	__sync_fetch_and_add(&ctl.xmit_sent, sent);
	__sync_fetch_and_add(&ctl.xmit_calls, 1);
	if (drops > 0) {
		__sync_fetch_and_add(&ctl.xmit_drops, drops);
		ctl.xmit_err = (__u64)(-err);
	}
	return 0;
}

SEC("tp_btf/xdp_redirect_err")
int BPF_PROG(tgen_redirect_err, const struct net_device *dev, const struct bpf_prog *xdp,
	     const void *tgt, int err)
{
	if (!ctl.active || ctl.cpu != bpf_get_smp_processor_id())
		return 0;
	if ((__u64)dev->ifindex != ctl.ifindex)
		return 0;
	__sync_fetch_and_add(&ctl.redirect_err, 1);
	ctl.redirect_err_last = (__u64)(-err);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
