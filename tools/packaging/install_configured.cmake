# Runs at install time (install(CODE) in tools/packaging/CMakeLists.txt): writes a file whose
# text names install paths, for the prefix actually installed into (`cmake --install --prefix`,
# or /usr when CPack builds the Debian packages).
#   HTAM_SRC   template with @HTAM_PREFIX@, @HTAM_ETC@, @HTAM_BINDIR@, @HTAM_SHAREDIR@,
#              @HTAM_UNIT_DATA_DIR@
#   HTAM_DEST  destination folder; "<etc>" = the configuration folder, else relative to the prefix
#   HTAM_NAME  file name written there;  HTAM_TMP  folder for the configured copy (build tree)
#   HTAM_MODE  "exec" (configured, executable), "file" (configured), "copy" (copied as it is) or
#              "conf" (htamd.conf: copied; for the /usr prefix its data_dir is /var/lib/htam, the
#              store of the packaged service, which the packaged htam then reads by default)
# The configuration folder is /etc/htam for the /usr prefix (Debian), <prefix>/etc/htam otherwise.
set(HTAM_PREFIX "${CMAKE_INSTALL_PREFIX}")
if(HTAM_PREFIX STREQUAL "/usr")
  set(HTAM_ETC "/etc/htam")
else()
  set(HTAM_ETC "${HTAM_PREFIX}/etc/htam")
endif()
set(HTAM_BINDIR "${HTAM_PREFIX}/bin")
# htamd.service's store: the configuration's data_dir for /usr (see "conf" below), else named.
if(HTAM_PREFIX STREQUAL "/usr")
  set(HTAM_UNIT_DATA_DIR "")
else()
  set(HTAM_UNIT_DATA_DIR " --general.data_dir /var/lib/htam")
endif()
set(HTAM_SHAREDIR "${HTAM_PREFIX}/share/htam")
if(HTAM_DEST STREQUAL "<etc>")
  set(_dest "${HTAM_ETC}")
else()
  set(_dest "${HTAM_PREFIX}/${HTAM_DEST}")
endif()
set(_tmp "${HTAM_TMP}/${HTAM_NAME}")
if(HTAM_MODE STREQUAL "copy")
  configure_file("${HTAM_SRC}" "${_tmp}" COPYONLY)
elseif(HTAM_MODE STREQUAL "conf")
  file(READ "${HTAM_SRC}" _text)
  if(HTAM_PREFIX STREQUAL "/usr")
    string(REPLACE "\n# data_dir = ./htam-data\n" "\ndata_dir = /var/lib/htam\n" _new "${_text}")
    if(_new STREQUAL _text)
      message(FATAL_ERROR "${HTAM_SRC}: no '# data_dir = ./htam-data' line to set")
    endif()
    set(_text "${_new}")
  endif()
  file(WRITE "${_tmp}" "${_text}")
else()
  configure_file("${HTAM_SRC}" "${_tmp}" @ONLY)
endif()
if(HTAM_MODE STREQUAL "exec")
  file(INSTALL DESTINATION "${_dest}" TYPE PROGRAM FILES "${_tmp}")
else()
  file(INSTALL DESTINATION "${_dest}" TYPE FILE FILES "${_tmp}")
endif()
