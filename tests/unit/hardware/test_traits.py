import os_traits

from node_agent.hardware import traits


def test_x86_features_map_to_os_traits():
    got = traits.cpu_traits({'avx', 'avx2', 'avx512f', 'sse4.2', 'aes',
                             'pclmuldq', 'pni', 'vme'})
    assert got == {os_traits.HW_CPU_X86_AVX, os_traits.HW_CPU_X86_AVX2,
                   os_traits.HW_CPU_X86_AVX512F, os_traits.HW_CPU_X86_SSE42,
                   os_traits.HW_CPU_X86_AESNI, os_traits.HW_CPU_X86_CLMUL,
                   os_traits.HW_CPU_X86_SSE3}


def test_tsx_needs_hle_and_rtm():
    assert os_traits.HW_CPU_X86_TSX not in traits.cpu_traits({'rtm'})
    assert os_traits.HW_CPU_X86_TSX in traits.cpu_traits({'rtm', 'hle'})


def test_every_mapped_trait_is_a_standard_trait():
    standard = set(os_traits.get_traits('HW_CPU'))
    for mapping in traits._BY_ARCH.values():
        assert set(mapping.values()) <= standard
    assert set(traits._ALL_OF) <= standard


def test_arch_selects_the_mapping():
    assert traits.cpu_traits({'aes'}, 'aarch64') == {
        os_traits.HW_CPU_AARCH64_AES}
    assert traits.cpu_traits({'aes'}, 's390x') == frozenset()
