# `cmake --install BUILD --prefix PREFIX` lays growtrace out under any prefix as it is laid out
# in the build tree, so that the command finds its parts relative to itself (tools/paths.cpp)
# wherever the prefix is, and wherever it is moved to:
#
#   PREFIX/bin/growtrace
#   PREFIX/lib/libgrowtrace.so                       the preload library
#   PREFIX/share/growtrace/python/                   the CPython agent: one C extension per
#     _growtrace_agent.cpython-3XY-x86_64-linux-gnu.so   version built (cmake/CPythonHeaders.cmake)
#     startup/                                       its start-up files
#   PREFIX/share/doc/growtrace/                      README and docs/
#
# The library goes to lib/ itself, not to a multiarch CMAKE_INSTALL_LIBDIR: it is loaded only
# by path (LD_PRELOAD, dlopen for attach), and the command looks for it in <bin>/../lib.
# `cpack` makes a .deb of the same files under /usr (docs/install.md).
include(GNUInstallDirs)

install(TARGETS growtrace_cli RUNTIME DESTINATION bin COMPONENT growtrace)
install(TARGETS growtrace_preload LIBRARY DESTINATION lib COMPONENT growtrace)
foreach(minor ${GROWTRACE_CPYTHON_MINORS})
  install(TARGETS growtrace_pyagent_3${minor} LIBRARY DESTINATION share/growtrace/python COMPONENT growtrace)
endforeach()
install(FILES
    ${PROJECT_SOURCE_DIR}/pyagent/startup/sitecustomize.py
    ${PROJECT_SOURCE_DIR}/pyagent/startup/growtrace-loader.py
    ${PROJECT_SOURCE_DIR}/pyagent/startup/growtrace-agent.py
  DESTINATION share/growtrace/python/startup COMPONENT growtrace)
file(GLOB growtrace_docs ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${growtrace_docs}
  DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT growtrace)

# --- the Debian package ---
# Its dependencies are those of the files it holds, as dpkg-shlibdeps finds them (libunwind,
# libdw, libzstd, libfmt, libstdc++...); gdb is needed by `growtrace attach` only.
set(CPACK_PACKAGE_NAME growtrace)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "finds memory held in caches that never stop growing")
set(CPACK_PACKAGE_DESCRIPTION "growtrace records a program's allocations through an LD_PRELOAD library \
(growtrace run) or by attaching to a running process, and reports the allocation stacks, CPython caches \
and containers whose memory keeps growing.")
set(CPACK_PACKAGE_CONTACT "growtrace maintainers <maintainers@users.noreply.a-seed-8d123aa7.example>")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "gdb")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3")
set(CPACK_STRIP_FILES OFF)  # the tracer's own frames are symbolized in crash reports
include(CPack)
