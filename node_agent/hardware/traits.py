"""libvirt CPU feature names -> os-traits ``HW_CPU_*`` traits.

libvirt names x86 features after its cpu_map (``sse4.2``, ``pclmuldq``,
``avx512f``); os-traits names capabilities a scheduler cares about.  Only
features with a standard trait appear here; everything else stays a libvirt
feature name in :attr:`HostInfo.cpu_features` and becomes no trait.  Some
traits need more than one feature (``HW_CPU_X86_BMI`` is bmi1, TSX needs
both hle and rtm): :data:`_ALL_OF`.
"""

import os_traits

_X86 = {
    '3dnow': os_traits.HW_CPU_X86_3DNOW,
    'abm': os_traits.HW_CPU_X86_ABM,
    'aes': os_traits.HW_CPU_X86_AESNI,
    'avx': os_traits.HW_CPU_X86_AVX,
    'avx2': os_traits.HW_CPU_X86_AVX2,
    'avx512bitalg': os_traits.HW_CPU_X86_AVX512BITALG,
    'avx512bw': os_traits.HW_CPU_X86_AVX512BW,
    'avx512cd': os_traits.HW_CPU_X86_AVX512CD,
    'avx512dq': os_traits.HW_CPU_X86_AVX512DQ,
    'avx512er': os_traits.HW_CPU_X86_AVX512ER,
    'avx512f': os_traits.HW_CPU_X86_AVX512F,
    'avx512ifma': os_traits.HW_CPU_X86_AVX512IFMA,
    'avx512pf': os_traits.HW_CPU_X86_AVX512PF,
    'avx512vbmi': os_traits.HW_CPU_X86_AVX512VBMI,
    'avx512vbmi2': os_traits.HW_CPU_X86_AVX512VBMI2,
    'avx512vl': os_traits.HW_CPU_X86_AVX512VL,
    'avx512vnni': os_traits.HW_CPU_X86_AVX512VNNI,
    'avx512-vpopcntdq': os_traits.HW_CPU_X86_AVX512VPOPCNTDQ,
    'vaes': os_traits.HW_CPU_X86_AVX512VAES,
    'gfni': os_traits.HW_CPU_X86_AVX512GFNI,
    'vpclmulqdq': os_traits.HW_CPU_X86_AVX512VPCLMULQDQ,
    'amx-bf16': os_traits.HW_CPU_X86_AMXBF16,
    'amx-int8': os_traits.HW_CPU_X86_AMXINT8,
    'amx-tile': os_traits.HW_CPU_X86_AMXTILE,
    'bmi1': os_traits.HW_CPU_X86_BMI,
    'bmi2': os_traits.HW_CPU_X86_BMI2,
    'pclmuldq': os_traits.HW_CPU_X86_CLMUL,
    'f16c': os_traits.HW_CPU_X86_F16C,
    'fma': os_traits.HW_CPU_X86_FMA3,
    'fma4': os_traits.HW_CPU_X86_FMA4,
    'mmx': os_traits.HW_CPU_X86_MMX,
    'mpx': os_traits.HW_CPU_X86_MPX,
    'pdpe1gb': os_traits.HW_CPU_X86_PDPE1GB,
    'sha-ni': os_traits.HW_CPU_X86_SHA,
    'sgx': os_traits.HW_CPU_X86_SGX,
    'sse': os_traits.HW_CPU_X86_SSE,
    'sse2': os_traits.HW_CPU_X86_SSE2,
    'pni': os_traits.HW_CPU_X86_SSE3,
    'ssse3': os_traits.HW_CPU_X86_SSSE3,
    'sse4.1': os_traits.HW_CPU_X86_SSE41,
    'sse4.2': os_traits.HW_CPU_X86_SSE42,
    'sse4a': os_traits.HW_CPU_X86_SSE4A,
    'stibp': os_traits.HW_CPU_X86_STIBP,
    'svm': os_traits.HW_CPU_X86_SVM,
    'tbm': os_traits.HW_CPU_X86_TBM,
    'vmx': os_traits.HW_CPU_X86_VMX,
    'xop': os_traits.HW_CPU_X86_XOP,
    'pcid': os_traits.HW_CPU_X86_INTEL_PCID,
    'spec-ctrl': os_traits.HW_CPU_X86_INTEL_SPEC_CTRL,
    'ssbd': os_traits.HW_CPU_X86_INTEL_SSBD,
    'md-clear': os_traits.HW_CPU_X86_INTEL_MD_CLEAR,
    'ibpb': os_traits.HW_CPU_X86_AMD_IBPB,
    'amd-ssbd': os_traits.HW_CPU_X86_AMD_SSBD,
    'virt-ssbd': os_traits.HW_CPU_X86_AMD_VIRT_SSBD,
    'amd-no-ssb': os_traits.HW_CPU_X86_AMD_NO_SSB,
}

_AARCH64 = {
    'fp': os_traits.HW_CPU_AARCH64_FP,
    'asimd': os_traits.HW_CPU_AARCH64_ASIMD,
    'aes': os_traits.HW_CPU_AARCH64_AES,
    'pmull': os_traits.HW_CPU_AARCH64_PMULL,
    'sha1': os_traits.HW_CPU_AARCH64_SHA1,
    'sha2': os_traits.HW_CPU_AARCH64_SHA2,
    'crc32': os_traits.HW_CPU_AARCH64_CRC32,
    'atomics': os_traits.HW_CPU_AARCH64_ATOMICS,
    'sve': os_traits.HW_CPU_AARCH64_SVE,
}

# Traits that only hold when every listed feature is present.
_ALL_OF = {
    os_traits.HW_CPU_X86_TSX: ('hle', 'rtm'),
}

_BY_ARCH = {
    'x86_64': _X86,
    'i686': _X86,
    'aarch64': _AARCH64,
}


def cpu_traits(features, arch='x86_64'):
    """The os-traits names that a set of libvirt CPU features implies."""
    features = set(features)
    mapping = _BY_ARCH.get(arch, {})
    traits = {mapping[f] for f in features if f in mapping}
    if mapping is _X86:
        traits.update(trait for trait, needed in _ALL_OF.items()
                      if features.issuperset(needed))
    return frozenset(traits)
