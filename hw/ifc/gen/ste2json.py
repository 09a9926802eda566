#!/usr/bin/env python3
"""Extracts the STE format v0 facts (bit offset and width of every field) from an rdma-core tree
into reference/ste-v0.json, the source ifcgen.py generates prm/ste.rs and prm/ste_tag.rs from.

    python3 hw/ifc/gen/ste2json.py /path/to/rdma-core-56.1 > hw/ifc/reference/ste-v0.json
    python3 hw/ifc/gen/ste2json.py /path/to/rdma-core-56.1 --check   # exit 1 if the JSON differs

The layouts live in rdma-core's providers/mlx5/mlx5_ifc.h (Linux's mlx5_ifc.h has none of them),
written as `struct mlx5_ifc_X_bits { u8 name[W]; ... };` where W is the width in bits; a field's
offset is the sum of the widths before it. Only the offsets and widths are kept (facts), nothing
else of the header. `dr_hw_ste_format` (the 64-byte entry: control, tag, mask) comes from dr_ste.c,
where it is declared with byte arrays of DR_STE_SIZE_CTRL/_TAG/_MASK (mlx5dv_dr.h).
"""
import json, os, re, sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(os.path.dirname(HERE), "reference", "ste-v0.json")
VERSION = "56.1"

# The structures extracted from providers/mlx5/mlx5_ifc.h, in output order.
STRUCTS = [
    "ste_general", "ste_rx_steering_mult", "ste_sx_transmit", "ste_modify_packet",
    "ste_eth_l2_src", "ste_eth_l2_dst", "ste_eth_l2_src_dst", "ste_eth_l2_tnl",
    "ste_eth_l3_ipv4_5_tuple", "ste_eth_l3_ipv4_misc", "ste_eth_l3_ipv6_dst",
    "ste_eth_l3_ipv6_src", "ste_eth_l4", "ste_eth_l4_misc", "ste_mpls", "ste_gre",
    "ste_general_purpose", "ste_register_0", "ste_register_1", "ste_src_gvmi_qp",
    "ste_flex_parser_0", "ste_flex_parser_1", "ste_flex_parser_tnl_vxlan_gpe",
    "ste_flex_parser_tnl_geneve", "ste_flex_parser_tnl_gtpu", "ste_tunnel_header",
    "dr_action_hw_set", "dr_action_hw_copy",
    # Not an STE, but an object DR creates that reference/mlx5_ifc_offsets.json lacks: the
    # FLOW_SAMPLER general object (0x20), as DR sends and queries it.
    "flow_sampler",
]


def parse_ifc(text):
    """struct name -> [(field, width)] for every `mlx5_ifc_*_bits` struct of plain u8 fields."""
    out = {}
    for m in re.finditer(r"struct\s+mlx5_ifc_(\w+)_bits\s*\{(.*?)\};", text, re.S):
        name, body = m.group(1), re.sub(r"/\*.*?\*/", "", m.group(2), flags=re.S)
        fields = []
        for decl in body.split(";"):
            decl = decl.strip()
            if not decl:
                continue
            f = re.fullmatch(r"u8\s+(\w+)\s*\[\s*(0x[0-9a-fA-F]+|\d+)\s*\]", decl)
            if not f:
                fields = None  # a nested type or an array of arrays: not one of ours
                break
            fields.append((f.group(1), int(f.group(2), 0)))
        if fields is not None:
            out[name] = fields
    return out


def enum_value(text, name):
    m = re.search(r"\b%s\s*=\s*(0x[0-9a-fA-F]+|\d+)" % name, text)
    return int(m.group(1), 0)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    src = os.path.join(sys.argv[1], "providers", "mlx5")
    ifc = parse_ifc(open(os.path.join(src, "mlx5_ifc.h")).read())
    facts = {
        "_source": (
            "rdma-core " + VERSION + ": providers/mlx5/mlx5_ifc.h (the mlx5_ifc_ste_*_bits and "
            "mlx5_ifc_dr_action_hw_*_bits structures, and mlx5_ifc_flow_sampler_bits, the FLOW_SAMPLER "
            "general object) and providers/mlx5/dr_ste.c (struct "
            "dr_hw_ste_format, sized by DR_STE_SIZE_CTRL/_TAG/_MASK of mlx5dv_dr.h). Facts only: "
            "the bit offset and width of each field, summed from the declared widths by "
            "hw/ifc/gen/ste2json.py. STE format v0 is ConnectX-5's (steering_format_version 0)."
        ),
        "_format": (
            "struct -> field -> [bit_offset, bit_width], as mlx5_ifc_offsets.json: offsets from the "
            "start of the struct, MSB-first within big-endian 32-bit dwords (byte = bit/8); names "
            "drop 'mlx5_ifc_' and '_bits'. The tag layouts (ste_eth_l2_src, ...) are 16 bytes: a "
            "tag at byte 32 and a mask at byte 48 of the 64-byte entry (dr_hw_ste_format)."
        ),
        "_sizes": {},
    }
    for s in STRUCTS:
        bit, fields = 0, {}
        for name, width in ifc[s]:
            fields[name] = [bit, width]
            bit += width
        facts[s] = fields
        facts["_sizes"][s] = bit
    hdr = open(os.path.join(src, "mlx5dv_dr.h")).read()
    ctrl, tag, mask = (enum_value(hdr, n) * 8 for n in ("DR_STE_SIZE_CTRL", "DR_STE_SIZE_TAG", "DR_STE_SIZE_MASK"))
    ste = open(os.path.join(src, "dr_ste.c")).read()
    decl = re.search(r"struct\s+dr_hw_ste_format\s*\{(.*?)\};", ste, re.S).group(1)
    widths = {"DR_STE_SIZE_CTRL": ctrl, "DR_STE_SIZE_TAG": tag, "DR_STE_SIZE_MASK": mask}
    bit, fields = 0, {}
    for name, size in re.findall(r"uint8_t\s+(\w+)\s*\[\s*(\w+)\s*\]", decl):
        fields[name] = [bit, widths[size]]
        bit += widths[size]
    facts["dr_hw_ste_format"] = fields
    facts["_sizes"]["dr_hw_ste_format"] = bit
    # _sizes after the structs it sizes would read oddly: keep the bookkeeping first.
    ordered = {k: facts[k] for k in ("_source", "_format", "_sizes")}
    ordered.update({k: v for k, v in facts.items() if not k.startswith("_")})
    text = json.dumps(ordered, indent=1) + "\n"
    if "--check" in sys.argv:
        if open(OUT).read() != text:
            sys.exit("reference/ste-v0.json differs from " + src)
        print("ste-v0.json agrees with", src)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
