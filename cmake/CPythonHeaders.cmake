# Finds the headers of every CPython growtrace can read (3.10 to 3.13 today). The preload library's
# per-version layouts (preload/cpython/version_3XX.cpp) and the agent's per-version
# builds (pyagent/) are compiled against them; a version whose headers are not found is left
# out of this build, and a traced program running it gets native stacks only, with one line
# saying so.
#
# Looked for, first found: $GROWTRACE_CPYTHON_3XX_INCLUDE (a folder holding Python.h), pyenv's
# builds ($PYENV_ROOT, ~/.pyenv, /root/.pyenv; newest patch release first), /usr/include.
# Sets GROWTRACE_CPYTHON_MINORS (e.g. "10;11;12;13") and GROWTRACE_CPYTHON_INCLUDE_<minor>.
# The versions growtrace knows are the ones with a layout file: preload/cpython/version_3XX.cpp.
file(GLOB layout_files RELATIVE ${CMAKE_SOURCE_DIR}/preload/cpython
     ${CMAKE_SOURCE_DIR}/preload/cpython/version_3[0-9]*.cpp)
set(GROWTRACE_CPYTHON_KNOWN_MINORS "")
foreach(file ${layout_files})
  string(REGEX REPLACE "^version_3([0-9]+)\\.cpp$" "\\1" minor "${file}")
  list(APPEND GROWTRACE_CPYTHON_KNOWN_MINORS ${minor})
endforeach()
list(SORT GROWTRACE_CPYTHON_KNOWN_MINORS COMPARE NATURAL)
set(GROWTRACE_CPYTHON_MINORS "")
foreach(minor ${GROWTRACE_CPYTHON_KNOWN_MINORS})
  set(candidates "")
  if(DEFINED ENV{GROWTRACE_CPYTHON_3${minor}_INCLUDE})
    list(APPEND candidates "$ENV{GROWTRACE_CPYTHON_3${minor}_INCLUDE}")
  endif()
  foreach(root "$ENV{PYENV_ROOT}" "$ENV{HOME}/.pyenv" "/root/.pyenv")
    if(root AND IS_DIRECTORY "${root}/versions")
      file(GLOB found LIST_DIRECTORIES true "${root}/versions/3.${minor}.*/include/python3.${minor}")
      list(SORT found COMPARE NATURAL ORDER DESCENDING)
      list(APPEND candidates ${found})
    endif()
  endforeach()
  list(APPEND candidates "/usr/include/python3.${minor}")
  set(chosen "")
  foreach(dir ${candidates})
    # Debug or free-threaded builds ("3.13t", "d") have other layouts: only plain builds.
    if(NOT chosen AND EXISTS "${dir}/Python.h" AND EXISTS "${dir}/pyconfig.h")
      file(STRINGS "${dir}/pyconfig.h" gil_disabled REGEX "^#define Py_GIL_DISABLED")
      file(STRINGS "${dir}/pyconfig.h" debug REGEX "^#define Py_DEBUG")
      if(NOT gil_disabled AND NOT debug)
        set(chosen "${dir}")
      endif()
    endif()
  endforeach()
  if(chosen)
    list(APPEND GROWTRACE_CPYTHON_MINORS ${minor})
    set(GROWTRACE_CPYTHON_INCLUDE_${minor} "${chosen}")
    message(STATUS "CPython 3.${minor} headers: ${chosen}")
  else()
    message(STATUS "CPython 3.${minor} headers: not found (3.${minor} programs get native stacks only)")
  endif()
endforeach()
if(NOT GROWTRACE_CPYTHON_MINORS)
  message(WARNING "no CPython headers found: Python programs will get native stacks only")
endif()
