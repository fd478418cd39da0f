# seqbus_generate(<target> IDL <file.idl>... [NAMESPACE <idl_package>=<c++::namespace>...]
#                 [DEPENDS <imported.idl>...])
#
# Runs `seqc generate --lang cpp` on the IDL files at build time (again whenever one of them,
# a DEPENDS file or the seqbus::codec runtime header changes) into
# ${CMAKE_CURRENT_BINARY_DIR}/<target>/, and makes <target> an INTERFACE library whose include
# directory holds the headers (<package>.hpp, the IDL package's dots as underscores; for a schema
# with messages also <package>_node.hpp, its typed node base over seqbus::Node, which a program
# that includes it links with seqbus::node) and which links seqbus::codec. seqc is the program in
# SEQBUS_SEQC, else `seqc` on the PATH (pip install seqc).
# The runtime the headers are generated for: in the source tree (runtime/cpp/cmake/..) or in an
# install prefix (lib/cmake/seqbus/../../..). The headers are generated again when it changes, as
# a header generated for another runtime does not compile (seqbus::codec::ABI).
foreach(_seqbus_dir ${CMAKE_CURRENT_LIST_DIR}/../include ${CMAKE_CURRENT_LIST_DIR}/../../../include)
  if(EXISTS ${_seqbus_dir}/seqbus/codec/runtime.hpp AND NOT SEQBUS_CODEC_RUNTIME_HEADER)
    get_filename_component(SEQBUS_CODEC_RUNTIME_HEADER ${_seqbus_dir}/seqbus/codec/runtime.hpp
                           ABSOLUTE)
  endif()
endforeach()

function(seqbus_generate target)
  cmake_parse_arguments(ARG "" "" "IDL;NAMESPACE;DEPENDS" ${ARGN})
  if(NOT ARG_IDL)
    message(FATAL_ERROR "seqbus_generate(${target}): no IDL files given")
  endif()
  if(NOT SEQBUS_SEQC)
    find_program(SEQBUS_SEQC seqc)
  endif()
  if(NOT SEQBUS_SEQC)
    message(FATAL_ERROR "seqbus_generate(${target}): seqc not found: install it "
                        "(pip install seqc) or set SEQBUS_SEQC to its path")
  endif()
  set(out ${CMAKE_CURRENT_BINARY_DIR}/${target})
  set(headers)
  set(packages)
  # one seqc run per file: files of one run must have distinct schema ids, and versions of one
  # schema (for evolution tests) share theirs
  foreach(idl IN LISTS ARG_IDL)
    get_filename_component(idl ${idl} ABSOLUTE)
    file(STRINGS ${idl} line REGEX "^[ \t]*package[ \t]+[a-z0-9_.]+" LIMIT_COUNT 1)
    if(NOT line MATCHES "package[ \t]+([a-z0-9_.]+)")
      message(FATAL_ERROR "seqbus_generate(${target}): ${idl} has no `package NAME;` line")
    endif()
    set(package ${CMAKE_MATCH_1})
    list(APPEND packages ${package})
    string(REPLACE "." "_" stem ${package})
    set(ns_options)
    foreach(ns IN LISTS ARG_NAMESPACE)
      if(ns MATCHES "^${package}=")
        list(APPEND ns_options --cpp-namespace ${ns})
      endif()
    endforeach()
    add_custom_command(
      OUTPUT ${out}/${stem}.hpp
      BYPRODUCTS ${out}/${stem}_node.hpp
      COMMAND ${SEQBUS_SEQC} generate --lang cpp --layout flat -o ${out} ${ns_options} ${idl}
      DEPENDS ${idl} ${ARG_DEPENDS} ${SEQBUS_CODEC_RUNTIME_HEADER}
      COMMENT "seqc: C++ codecs of ${idl}"
      VERBATIM)
    list(APPEND headers ${out}/${stem}.hpp)
  endforeach()
  foreach(ns IN LISTS ARG_NAMESPACE)
    string(REGEX REPLACE "=.*" "" package "${ns}")
    if(NOT package IN_LIST packages)
      message(FATAL_ERROR "seqbus_generate(${target}): NAMESPACE ${ns}: no IDL file given has "
                          "package ${package} (given: ${packages})")
    endif()
  endforeach()
  add_custom_target(${target}_seqc DEPENDS ${headers})
  add_library(${target} INTERFACE)
  target_include_directories(${target} INTERFACE ${out})
  target_link_libraries(${target} INTERFACE seqbus::codec)
  add_dependencies(${target} ${target}_seqc)
endfunction()
